"""Real-browser tests: the app served by `streamlit run` on a free loopback port, driven by
Playwright for Python with Debian's chromium (never a browser Playwright downloads).

Every request that leaves the app's own server is aborted and recorded; a test that caused one
fails. Screenshots go to tests/browser/screenshots/ (git-ignored).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = REPO / "tests" / "browser" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser-db")


@pytest.fixture(scope="session")
def app_url(browser_db):
    """Start the app once per session on its own LanceDB folder; the sample is ingested on first load."""
    port = _free_port()
    env = {**os.environ, "WORKBENCH_DB": str(browser_db), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = open(tmp_path_log(browser_db), "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail(f"streamlit did not start; log: {Path(log.name).read_text()[-2000:]}")
    yield url
    server.terminate()
    server.wait(timeout=20)
    log.close()


def tmp_path_log(folder: Path) -> str:
    return str(folder.parent / "streamlit.log")


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (./run.sh test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, app_url, request):
    """A fresh page that aborts (and records) every request not addressed to the app's server."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []

    def guard(route):
        if route.request.url.startswith(app_url) or route.request.url.startswith(app_url.replace("http", "ws")):
            route.continue_()
        elif route.request.url.startswith(("data:", "blob:", "about:")):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.set_default_timeout(120_000)
    yield page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not outside, f"requests left the app's server: {outside}"
