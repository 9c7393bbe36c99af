#!/usr/bin/env python3
"""Headless Chromium and its driver for the browser test, from Debian's packages.

    python scripts/browser.py install
        install `chromium` and `chromium-driver` with apt-get if either is
        missing, then print the two paths, the browser's first.

The browser test (tests/test_browser.py) runs this before it starts; the
browser is Debian's, never one that a tool downloads. Standard library only.
A browser that cannot be installed is an error with what to do, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

PACKAGES = ["chromium", "chromium-driver"]


class BrowserError(RuntimeError):
    """Chromium could not be installed; the message says what to do."""


def find() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed, else None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def ensure_installed() -> tuple[str, str]:
    """(chromium, chromedriver), installed with apt-get first if need be."""
    found = find()
    if found:
        return found
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo"):
        prefix = ["sudo", "env", "DEBIAN_FRONTEND=noninteractive"]
    else:
        raise BrowserError(
            "chromium and chromedriver are not installed, and installing them needs root or "
            f"sudo: run `apt-get install {' '.join(PACKAGES)}` as root"
        )
    if not shutil.which("apt-get"):
        raise BrowserError(
            "chromium and chromedriver are not installed and there is no apt-get here: "
            "install Chromium and its chromedriver so that both are on PATH"
        )
    print(f"[browser] installing {' '.join(PACKAGES)} (first time only)", file=sys.stderr)
    began = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
    ):
        done = subprocess.run(
            prefix + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if done.returncode != 0:
            tail = "\n".join(done.stdout.splitlines()[-20:])
            raise BrowserError(f"`{' '.join(cmd)}` failed ({done.returncode}):\n{tail}")
    print(f"[browser] installed in {time.monotonic() - began:.1f}s", file=sys.stderr)
    found = find()
    if not found:
        raise BrowserError(f"installed {' '.join(PACKAGES)} but found no chromium or chromedriver")
    return found


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        browser, driver = ensure_installed()
    except BrowserError as e:
        print(f"[browser] error: {e}", file=sys.stderr)
        return 1
    print(browser)
    print(driver)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
