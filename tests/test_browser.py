"""The widgets in a real browser: JupyterLab on a free port, driven by headless Chromium (Selenium).

Each notebook that shows a widget is opened in JupyterLab, with its TODOs filled from the
reference so every cell runs, and run top to bottom (JupyterLab's own "run all cells"). Then,
on the rendered page:

* no "Error displaying widget" and no widget printed as raw text (``VBox(...)``);
* moving the explorer's reuse slider one step updates its output; clicking the heap viewer's
  "next" button changes its table;
* each score explorer's figure is drawn on first render and after the slider moved: an image
  whose pixels vary (the last test; it records a known defect, see its mark).

Screenshots of every notebook and widget go to ``build/browser-screenshots/`` (or
``$KVSCHED_SCREENSHOTS``). Runs where Debian's ``chromium`` and ``chromium-driver`` are
installed (`.ci/run` installs them when it can); no browser is ever downloaded.
"""
from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from kvsched_lab.course.todos import fill_todos, reference_sources
from kvsched_lab.notebook_files import read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = Path(os.environ.get("KVSCHED_SCREENSHOTS") or ROOT / "build" / "browser-screenshots")
WIDGET_CALLS = ("score_explorer(", "heap_viewer(", "upload_answers(")
RUN_TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
                                reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")


def widget_notebooks():
    return [p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))
            if any(call in p.read_text(encoding="utf-8") for call in WIDGET_CALLS)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving filled copies of the widget notebooks; yields its base URL and token."""
    folder = tmp_path_factory.mktemp("browser")
    work = folder / "notebooks"
    work.mkdir()
    refs = reference_sources()
    for path in widget_notebooks():
        write_notebook(fill_todos(read_notebook(path), refs), work / path.name)
    # Every cell stays in the page (no virtual scrolling), and no news pop-up covers it.
    settings = folder / "settings"
    for plugin, value in (("notebook-extension/tracker", '{"windowingMode": "none"}'),
                          ("apputils-extension/notification", '{"fetchNews": "false"}')):
        file = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(value)
    port, token = free_port(), "kvsched-browser-test"
    env = dict(os.environ, HOME=str(folder / "home"), JUPYTER_CONFIG_DIR=str(folder / "config"),
               JUPYTER_RUNTIME_DIR=str(folder / "runtime"), KVSCHED_ANSWERS=str(folder / "answers"),
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}", "--LabApp.expose_app_in_browser=True",
           f"--LabApp.user_settings_dir={settings}",
           "--ServerApp.open_browser=False", "--allow-root"]
    log = open(folder / "jupyter.log", "w")
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (folder / "jupyter.log").read_text()[-3000:]
                time.sleep(0.5)
        yield base, token, work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="kvsched-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(predicate, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# In the page: how many cells are queued or running, and whether the kernel is idle.
BUSY_JS = """
const nb = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!nb || !nb.sessionContext || !nb.sessionContext.session || !nb.sessionContext.session.kernel) return null;
const prompts = [...document.querySelectorAll('.jp-InputArea-prompt')].map(p => p.textContent.trim());
return {status: nb.sessionContext.session.kernel.status, pending: prompts.filter(t => t.includes('*')).length,
        done: prompts.filter(t => /\\[\\d+\\]/.test(t)).length, cells: nb.content.widgets.length};
"""


def run_notebook(driver, base: str, token: str, name: str) -> None:
    driver.get(f"{base}/lab/tree/{name}?token={token}&reset")
    wait_for(lambda: (driver.execute_script(BUSY_JS) or {}).get("status") == "idle", 90, f"{name}'s kernel")
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")

    def finished():
        state = driver.execute_script(BUSY_JS) or {}
        return state.get("status") == "idle" and state.get("pending") == 0 and state.get("done", 0) > 0

    wait_for(lambda: finished() and (time.sleep(1.0) or finished()), RUN_TIMEOUT_S, f"{name} to run")


def image_spread(png: bytes) -> int:
    """How many distinct colours a PNG screenshot of the explorer's figure has: a blank figure has
    one or two, a drawn one hundreds."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGBA")
    return len(image.getcolors(maxcolors=1 << 24) or [])


# notebook and explorer -> distinct colours of the explorer's figure at first render and after the
# slider moved (checked by the last test)
FIRST_FIGURES, FIGURES_AFTER_SLIDER = {}, {}


def explorer_figure_png(explorer) -> bytes:
    """The explorer's figure as the browser draws it (a screenshot of its image widget; ipywidgets 8
    serves the PNG through a blob URL, 7 through a data URL), or b"" before it has a size."""
    imgs = explorer.find_elements("css selector", "img.widget-image")
    if not imgs or imgs[0].size["width"] < 50 or imgs[0].size["height"] < 50:
        return b""
    return imgs[0].screenshot_as_png


@pytest.mark.parametrize("path", widget_notebooks(), ids=lambda p: p.name)
def test_widgets_render_and_respond_in_chromium(lab, browser, path):
    from selenium.webdriver.common.keys import Keys

    base, token, _ = lab
    stem = path.stem[:2]
    run_notebook(browser, base, token, path.name)
    page = browser.find_element("css selector", "body").text
    browser.save_screenshot(str(SHOTS / f"{stem}-page.png"))
    assert "Error displaying widget" not in page
    assert "VBox(" not in page and "HBox(" not in page, "a widget was printed as text, not displayed"
    explorers = browser.find_elements("css selector", ".widget-vbox:has(.widget-slider):has(img.widget-image)")
    viewers = browser.find_elements("css selector", ".widget-vbox:has(.jupyter-button):has(.widget-html)")
    assert explorers or viewers, f"{path.name} shows no widget"

    for i, explorer in enumerate(explorers):
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", explorer)
        png = wait_for(lambda: explorer_figure_png(explorer), 60, "the explorer's first figure")
        FIRST_FIGURES[f"{path.name} explorer {i}"] = image_spread(png)
        text = explorer.find_element("css selector", ".widget-html").text
        assert "prefix-hit rate" in text, text
        time.sleep(0.5)  # let the scroll settle before the screenshot
        explorer.screenshot(str(SHOTS / f"{stem}-explorer{i}-first.png"))
        handle = explorer.find_element("css selector", ".widget-slider .noUi-handle, .widget-slider input")
        handle.click()
        handle.send_keys(Keys.ARROW_RIGHT)  # one step of 0.25
        wait_for(lambda: "reuse=1.25" in explorer.find_element("css selector", ".widget-html").text, 60,
                 "the explorer's text to follow the reuse slider (1.00 -> 1.25)")
        time.sleep(2.0)  # the figure follows the text in the same update
        FIGURES_AFTER_SLIDER[f"{path.name} explorer {i}"] = image_spread(explorer_figure_png(explorer))
        explorer.screenshot(str(SHOTS / f"{stem}-explorer{i}-after-slider.png"))

    for i, viewer in enumerate(viewers):
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", viewer)
        table = viewer.find_element("css selector", ".widget-html")
        before = table.get_attribute("innerHTML")
        assert "<table" in before and "heap" in table.text
        time.sleep(0.5)
        viewer.screenshot(str(SHOTS / f"{stem}-heapviewer{i}-first.png"))
        nxt = [b for b in viewer.find_elements("css selector", ".jupyter-button") if "next" in b.text]
        nxt[0].click()
        wait_for(lambda: table.get_attribute("innerHTML") != before, 20, "the heap table to change after 'next'")
        assert "touch #1" in table.text
        time.sleep(0.5)
        viewer.screenshot(str(SHOTS / f"{stem}-heapviewer{i}-after-next.png"))


def test_each_explorer_figure_is_drawn_on_first_render_and_after_the_slider():
    assert FIRST_FIGURES, "run with the widget notebooks' test above"
    blank = [f"{name} ({when})" for when, figures in (("first render", FIRST_FIGURES),
                                                      ("after the slider", FIGURES_AFTER_SLIDER))
             for name, colours in figures.items() if colours <= 20]
    assert not blank, f"blank figure: {blank}"


# In the page: whether the open notebook has unsaved changes, and the metadata JupyterLab holds.
DIRTY_JS = """
const nb = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!nb || !nb.context || !nb.context.model) return null;
return {dirty: nb.context.model.dirty, metadata: nb.context.model.toJSON().metadata};
"""


@pytest.mark.parametrize("folder", ["notebooks", "notebooks/zh"])
def test_a_notebook_opened_and_saved_in_jupyterlab_is_unchanged(lab, browser, folder):
    """Before: JupyterLab rewrote kernelspec.display_name and language_info as the kernel started,
    so every notebook showed unsaved changes the moment it opened, and saving it changed the file
    (that metadata, key order, sources split into lines). Needs the kernel's Python to be the one
    the notebooks name (kvsched_lab/notebook_files.py): JupyterLab writes its exact version."""
    import json
    import platform

    from kvsched_lab.notebook_files import NOTEBOOK_METADATA

    wanted = NOTEBOOK_METADATA["language_info"]["version"]
    if platform.python_version() != wanted:
        pytest.skip(f"the kernel runs Python {platform.python_version()}; the notebooks name {wanted}")
    base, token, work = lab
    path = sorted((ROOT / folder).glob("0*.ipynb"))[0]
    name = ("zh__" if folder.endswith("zh") else "en__") + path.name
    shutil.copyfile(path, work / name)  # as shipped: clean, nothing run
    browser.get(f"{base}/lab/tree/{name}?token={token}&reset")
    wait_for(lambda: (browser.execute_script(BUSY_JS) or {}).get("status") == "idle", 90, f"{name}'s kernel")
    time.sleep(3.0)  # the kernel's info reply has reached the model by now
    state = browser.execute_script(DIRTY_JS)
    browser.save_screenshot(str(SHOTS / f"opened-{name}.png"))
    assert state and state["dirty"] is False, json.dumps(state)
    before = (work / name).stat().st_mtime_ns
    browser.execute_script("window.jupyterapp.commands.execute('docmanager:save');")
    wait_for(lambda: (work / name).stat().st_mtime_ns != before, 30, f"{name} to be saved")
    assert (work / name).read_bytes() == path.read_bytes()
