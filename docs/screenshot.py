"""The picture of the HTML report in docs/reports.md: ``python docs/screenshot.py REPORT.html docs/report.png``.

Opens the page (as ``./examples/mcqa/run.sh --gym-html=REPORT.html`` wrote it) in headless Chromium from Debian's
packages, opens its first failed rollout, and saves a screenshot of the window.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--hide-scrollbars", "--window-size=1600,1400",
)  # fmt: skip


def main(page: Path, picture: Path) -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.get(page.resolve().as_uri())
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script("return document.documentElement.dataset.rendered") == "1"
            )
            driver.execute_script("document.querySelector('.cell[data-status=failed]').click()")
            driver.save_screenshot(str(picture))
        finally:
            driver.quit()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
