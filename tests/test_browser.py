"""The jobs page in a real browser: headless Chromium drives `./myapp serve` as an operator would.

Chromium and its driver are Debian's (scripts/browser.py installs them when
missing); Selenium is pointed at them and downloads nothing. The test logs in,
finds a job that failed for good, runs it again, and sees it gone once the
serving app's queue has run it. Set JOBQ_PAGE_SCREENSHOT to a path (such as
docs/page.png) to keep the screenshot it takes; it is always in the test's folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from serving import serving, until
from sqlalchemy.pool import NullPool

from apps import APP, ROOT, Installed
from dbfixtures import fresh_database

# One worker installs Debian's chromium (apt takes one install at a time) and runs them all.
pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from selenium.webdriver.remote.webelement import WebElement

PASSWORD = "page-test-password"


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """(chromium, chromedriver): Debian's, installed now if missing; never a skip for want of it."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "browser.py"), "install"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"no browser for the page's test: {done.stderr.strip()}", pytrace=False)
    browser, driver = done.stdout.split()
    return browser, driver


@pytest.fixture
def browser(chromium: tuple[str, str]) -> Iterator[webdriver.Chrome]:
    binary, driver = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,860"):
        options.add_argument(argument)
    # A reader far from UTC, so the page's own zone shows beside each UTC time.
    service = Service(executable_path=driver, env={**os.environ, "TZ": "Asia/Tokyo"})
    chrome = webdriver.Chrome(options=options, service=service)
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.mark.parametrize("db", ["sqlite", "postgres", "mysql"])
def test_an_operator_runs_a_failed_job_again_from_the_page(
    db: str,
    apps: Callable[[str], Installed],
    browser: webdriver.Chrome,
    tmp_path: Path,
) -> None:
    app = apps(db)
    with contextlib.ExitStack() as stack:
        if db == "sqlite":
            url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
        else:
            url = stack.enter_context(fresh_database(app.server(), "page"))
        env = app.env(DATABASE_URL=url, JOBS_PAGE_PASSWORD=PASSWORD, QUEUE_WORKERS="2")

        def myapp(*args: str) -> str:
            done = app.run(f"./{APP}", *args, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        # Two welcome mails for users not yet signed up: each fails for good at once.
        myapp("migrate")
        assert (
            myapp("jobs", "push", "welcome-mail", '{"user": 1}') == "Pushed welcome-mail job 1.\n"
        )
        assert (
            myapp("jobs", "push", "welcome-mail", '{"user": 2}') == "Pushed welcome-mail job 2.\n"
        )
        assert "failed" in myapp("jobs", "run-due")
        assert [job["id"] for job in json.loads(myapp("jobs", "--json"))] == ["2", "1"]
        # User 1 signs up now (with a welcome mail of its own), so job 1 runs well a second time.
        myapp("sign-up", "ann@example.com")

        with serving(app, env, tmp_path / "serve.log") as port:
            _run_job_1_again(browser, port, tmp_path / f"page-{db}.png")
            engine = sa.create_engine(url, poolclass=NullPool)
            try:

                def ran() -> bool:
                    with engine.connect() as conn:
                        mails = "SELECT count(*) FROM jobs WHERE kind = 'welcome-mail'"
                        return conn.exec_driver_sql(mails).scalar() == 1

                # The queue ran job 1 (and the sign-up's mail): of the mails, job 2 is kept, failed.
                until(ran, "the serving app's queue ran the job run again")
            finally:
                engine.dispose()
            browser.refresh()
            assert _row(browser, "1") is None
            assert _row(browser, "2") is not None
        assert [job["id"] for job in json.loads(myapp("jobs", "--json"))] == ["2"]

    keep = os.environ.get("JOBQ_PAGE_SCREENSHOT")
    if keep and db == "sqlite":
        shutil.copyfile(tmp_path / f"page-{db}.png", ROOT / keep)


def _text(browser: webdriver.Chrome, selector: str) -> str:
    """The text of the first element ``selector`` finds, or "" while the page is loading."""
    try:
        return str(browser.find_element(By.CSS_SELECTOR, selector).text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""  # the page it was on has gone: the next look finds the new one


def _row(browser: webdriver.Chrome, id: str) -> WebElement | None:
    found = browser.find_elements(By.ID, f"job-{id}")
    return found[0] if found else None


def _run_job_1_again(browser: webdriver.Chrome, port: int, screenshot: Path) -> None:
    # Without the password, the browser is refused (it would ask for one) and shows no job.
    browser.get(f"http://127.0.0.1:{port}/jobs/")
    assert "Failed jobs" not in browser.title
    assert _row(browser, "1") is None
    # Logged in, as a browser does with the user and password in the address.
    browser.get(f"http://admin:{PASSWORD}@127.0.0.1:{port}/jobs/")
    assert browser.title.startswith("Failed jobs")
    row = _row(browser, "1")
    assert row is not None, browser.page_source
    assert "user 1 has gone" in row.text
    # The page's script shows each time in the reader's zone too.
    until(lambda: browser.find_elements(By.CSS_SELECTOR, "span.local"), "local times")
    assert "Asia/Tokyo" in browser.find_element(By.CSS_SELECTOR, "span.local").text

    # The job's own page, then back to run it again from the list.
    row.find_element(By.LINK_TEXT, "1").click()
    assert "Job 1: welcome-mail" in browser.find_element(By.TAG_NAME, "h2").text
    assert '"user": 1' in browser.find_element(By.CSS_SELECTOR, "pre.value").text
    browser.back()
    row = _row(browser, "1")
    assert row is not None
    row.find_element(By.CSS_SELECTOR, "button").click()
    until(
        lambda: "1 job back to run" in _text(browser, "main"),
        "the page says the job is back to run",
    )
    assert _row(browser, "1") is None
    browser.save_screenshot(str(screenshot))
