"""The browser tier's fixture ``chromium`` and :func:`open_page`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The browser tier: the HTML report opened in headless Chromium from Debian's packages, driven by Selenium through
# Debian's chromedriver (nothing is downloaded: Selenium's own driver manager is never asked).

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--window-size=1400,1000",
)  # fmt: skip
"""Headless, as root, and quiet on a closed network: no sync, updates, or other background requests."""


def start_chromium(profile: Path) -> Any:
    """A Selenium driver of headless Chromium with a fresh profile in ``profile`` that keeps the page's console
    messages (read with ``driver.get_log("browser")``). Fails the test, naming the packages, when Chromium or
    chromedriver is not installed."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(
            f"the browser tests need {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium (a Selenium WebDriver), quit after the test. After the test has run, the page must
    not have logged an error on its console."""
    driver = start_chromium(tmp_path / "chromium-profile")
    try:
        yield driver
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], f"the page logged errors: {errors}"
    finally:
        driver.quit()


def open_page(driver: Any, page: Path, timeout: float = 30.0) -> None:
    """Load ``page`` and wait until its script has drawn the grids (``data-rendered`` on ``<html>``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.documentElement.getAttribute('data-rendered')") == "1"
    )
