"""What the browser tests share: the servers started the README's way, Chromium through
Playwright, the webserver's GraphQL API as the oracle, and helpers for Dagster's pages.

Import this only after the skips of the calling module (``require_browser``), since it
imports Playwright.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.processes import free_port

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("GNNCORE_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS_ROOT = Path(os.environ.get("GNNCORE_TEST_ARTIFACTS") or REPO / "test-artifacts")
DOCS_IMG = REPO / "docs" / "img"
BIN = Path(sys.executable).parent

if not CHROMIUM.exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM} (apt-get install chromium, or `make sysdeps` as root; "
        "GNNCORE_CHROMIUM names another binary)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the playwright package is missing (pip install playwright; it is in the test extra)",
)
expect = sync_api.expect
PlaywrightTimeoutError = sync_api.TimeoutError

LOCATION = "pipelines.definitions"
REPOSITORY = "__repository__"
GROUP = "gnn"
JOB = "train_job"
#: Chromium on a closed network as root: no sandbox, no GPU, none of its background fetches.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# How long a run may take to finish. make test runs two xdist workers on two cores, so
# the Materialize-all run shares the CPU with the other worker's tests: it took 375 s
# of its test in one fresh-clone run and missed 360 s in the next (make demo ran beside
# it). At load 18 (other test runs beside it) it was through training at 555 s, 424 s
# of them spent starting its step processes, and missed 600 s. The wait only bounds a
# hang; the run must still succeed with every check passed.
RUN_TIMEOUT_S = 900.0
SERVER_TIMEOUT_S = 180.0
#: How often a wait for a run asks the webserver (one small GraphQL query): a run's end
#: is seen within a second, not up to three (each file waits for 2 to 3 runs).
RUN_POLL_S = 1.0


def wait_until(what: str, probe: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class Server:
    """One server process in its own session (so its children stop with it)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(
                f"{self.name} exited with {self.proc.returncode}; its log ends:\n{self.tail()}"
            )

    def terminate(self) -> None:
        """SIGTERM the process group (:meth:`stop` then waits for it)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL whatever of the session is left
        (``dagster dev`` can take a long while to wind down its children)."""
        sid = self.proc.pid
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(sid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Children that left the group (run workers, code servers) still carry the session id.
        out = subprocess.run(["ps", "-o", "pid=", "-s", str(sid)], capture_output=True, text=True)
        for pid in (int(p) for p in out.stdout.split()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Servers:
    dagster_url: str
    mlflow_url: str
    mlflow_port: int
    data_root: Path
    artifacts: Path
    servers: list[Server] = field(default_factory=list)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.dagster_url}/graphql", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)
        assert not answer.get("errors"), answer["errors"]
        return dict(answer["data"])

    def mlflow_api(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.mlflow_url}/api/2.0/mlflow/{path}", timeout=30) as r:
            return dict(json.load(r))

    def check_alive(self) -> None:
        for server in self.servers:
            server.check_alive()


def start(name: str, argv: list[str], env: dict[str, str], logs: Path, cwd: Path = REPO) -> Server:
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Server(name, proc, log)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def run_servers(
    base: Path,
    artifacts: Path,
    link_mlflow: bool = False,
    cwd: Path = REPO,
    extra_env: dict[str, str] | None = None,
) -> Iterator[Servers]:
    """``make ui`` and ``make mlflow-ui`` (with one worker) on a temporary DAGSTER_HOME
    and data root (``base/dagster_home``, ``base/data``), logs into ``artifacts``,
    started in ``cwd`` (which must hold ``workspace.yaml``). With ``link_mlflow``,
    ``GNNCORE_MLFLOW_UI_URL`` points the assets' run links at this MLflow UI, as
    ``make ui`` points them at ``make mlflow-ui``'s. ``extra_env`` is set for both
    (settings a user could give them, such as the inbox sensor's timing)."""
    home, data = base / "dagster_home", base / "data"
    home.mkdir()
    shutil.copy(REPO / "pipelines" / "dagster.yaml", home / "dagster.yaml")
    (data / "mlflow").mkdir(parents=True)
    # Nothing of a developer's own setup (GNNCORE_MLFLOW_URI, the postgres profile's
    # GNNCORE_PG_*) leaks in: this instance and its MLflow store live in ``base``.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNNCORE_")}
    env.update(
        DAGSTER_HOME=str(home),
        GNNCORE_DATA_ROOT=str(data),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # mlflow ui runs .venv/bin/uvicorn
        PYTHONUNBUFFERED="1",
    )
    dagster_port, mlflow_port = free_port(), free_port()
    state = Servers(
        f"http://127.0.0.1:{dagster_port}",
        f"http://127.0.0.1:{mlflow_port}",
        mlflow_port,
        data,
        artifacts,
    )
    if link_mlflow:
        env["GNNCORE_MLFLOW_UI_URL"] = state.mlflow_url
    env.update(extra_env or {})
    state.servers.append(
        start(
            "dagster",
            [str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1"]
            + ["-p", str(dagster_port)],
            env,
            artifacts,
            cwd,
        )
    )
    state.servers.append(
        start(
            "mlflow",
            [str(BIN / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{data}/mlflow/mlflow.db"]
            + ["--default-artifact-root", f"{data}/mlflow/artifacts"]
            + ["--host", "127.0.0.1", "--port", str(mlflow_port)]
            # One worker serves the one browser: the default 4 cost about 1 GiB and
            # 15 to 20 s CPU more to start (measured in docs/TESTING.md).
            + ["--workers", "1"],
            # Without MLflow's job runner: 7 huey consumer processes (each importing
            # mlflow) for server-side jobs (GenAI scorers) the tests never start.
            {**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            artifacts,
            cwd,
        )
    )
    try:

        def location_loaded() -> bool:
            state.check_alive()
            if not http_ok(f"{state.dagster_url}/server_info"):
                return False
            entries = state.graphql(
                "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus"
                " locationOrLoadError { __typename ... on PythonError { message } } } } } }"
            )["workspaceOrError"]["locationEntries"]
            for entry in entries:
                if entry["locationOrLoadError"]["__typename"] == "PythonError":
                    pytest.fail(f"code location failed to load: {entry['locationOrLoadError']}")
            return any(e["name"] == LOCATION and e["loadStatus"] == "LOADED" for e in entries)

        def mlflow_up() -> bool:
            state.check_alive()
            return http_ok(f"{state.mlflow_url}/health")

        # Both must be up before the pipeline's first MLflow write: the UI creates the
        # SQLite store's schema, and two first writers would migrate it at once.
        wait_until("the Dagster webserver and code location", location_loaded, SERVER_TIMEOUT_S)
        wait_until("the MLflow UI", mlflow_up, SERVER_TIMEOUT_S)
        yield state
    finally:
        # Both wind down at once: each may take its whole grace period.
        for server in state.servers:
            server.terminate()
        for server in reversed(state.servers):
            server.stop()


@dataclass
class Ui:
    """The browser: a normal 1280×800 page, and a large page drawn at 0.5 scale (also
    1280×800 pixels) on which the asset graph is drawn with full-size nodes (the
    partitioned nodes are taller; on a smaller page the graph zooms out past the scale
    at which Dagster draws nodes as bare names)."""

    page: Any
    graph_page: Any
    artifacts: Path
    shots: list[str] = field(default_factory=list)

    def shot(self, name: str, page: Any = None) -> Path:
        path = self.artifacts / name
        (page or self.page).screenshot(path=str(path))
        self.shots.append(name)
        return path

    def rest(self) -> None:
        """Leave both pages on a blank page while nobody looks at them. A Dagster page
        left open keeps polling the webserver and redrawing (software rendering, no
        GPU): over the tutorial's runs, Chromium took 145 of the file's 394 CPU
        seconds, most of it while the tests waited for runs (docs/TESTING.md)."""
        for page in (self.page, self.graph_page):
            page.goto("about:blank")


@contextlib.contextmanager
def open_browser(artifacts: Path, docs_shots: Mapping[str, str] | None = None) -> Iterator[Ui]:
    """Headless Chromium with a normal and a large page writing screenshots to
    ``artifacts``; afterwards, with ``GNNCORE_UPDATE_DOCS_IMG`` set, the shots in
    ``docs_shots`` (artifact name -> docs/img name) are copied into docs/img."""
    with _chromium(artifacts) as ui:
        yield ui
    if docs_shots and os.environ.get("GNNCORE_UPDATE_DOCS_IMG"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for shot, name in docs_shots.items():
            if (artifacts / shot).exists():
                shutil.copy(artifacts / shot, DOCS_IMG / name)


class Findings(dict[str, Any]):
    """What the steps of a browser test found so far (later steps read it)."""

    def need(self, *keys: str) -> None:
        """Skip a step whose earlier steps failed (the failure is reported there)."""
        missing = [k for k in keys if k not in self]
        if missing:
            pytest.skip(f"an earlier step failed before finding {', '.join(missing)}")


@contextlib.contextmanager
def _chromium(artifacts: Path) -> Iterator[Ui]:
    with sync_api.sync_playwright() as playwright:
        # expect() waits 5 s by default; a page load under the other test worker's load
        # took longer in CI (and up to 10 s here at load 20; the tutorial's launchpad
        # editor too). Actions already wait 30 s.
        sync_api.expect.set_options(timeout=30_000)
        # A fresh temporary profile (user-data-dir) per launch; the driver ships in the wheel.
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        pages = []
        for viewport, scale in (((1280, 800), 1.0), ((2560, 1600), 0.5)):
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=scale
            )
            # Dagster's first-visit "join the community" dialog would cover the page.
            context.add_init_script("window.localStorage.setItem('communityNux', '\"1\"')")
            context.set_default_timeout(30_000)
            pages.append(context.new_page())
        try:
            yield Ui(pages[0], pages[1], artifacts)
        finally:
            browser.close()


# --- GraphQL oracles -------------------------------------------------------------------

GROUP_ASSETS = """
query ($group: AssetGroupSelector!) {
  assetNodes(group: $group) {
    assetKey { path }
    jobNames
    assetMaterializations(limit: 1) { runId }
    assetChecksOrError {
      ... on AssetChecks {
        checks { name executionForLatestMaterialization { status runId evaluation { success } } }
      }
    }
  }
}"""
GROUP_SELECTOR = {
    "groupName": GROUP,
    "repositoryName": REPOSITORY,
    "repositoryLocationName": LOCATION,
}


def group_state(servers: Servers) -> list[dict[str, Any]]:
    return list(servers.graphql(GROUP_ASSETS, {"group": GROUP_SELECTOR})["assetNodes"])


def asset_name(node: dict[str, Any]) -> str:
    return "/".join(node["assetKey"]["path"])


def checks_of(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node["assetChecksOrError"].get("checks") or [])


def run_ids(servers: Servers) -> set[str]:
    data = servers.graphql("{ runsOrError { ... on Runs { results { runId } } } }")
    return {r["runId"] for r in data["runsOrError"]["results"]}


def run_tags(servers: Servers, run_id: str) -> dict[str, str]:
    data = servers.graphql(
        "query ($id: ID!) { runOrError(runId: $id) { ... on Run { tags { key value } } } }",
        {"id": run_id},
    )
    return {t["key"]: t["value"] for t in data["runOrError"]["tags"]}


def run_status(servers: Servers, run_id: str) -> str:
    data = servers.graphql(
        "query ($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
    )
    return str(data["runOrError"]["status"])


def run_config(servers: Servers, run_id: str) -> dict[str, Any]:
    """The run config a run was launched with (as the UI submitted it)."""
    data = servers.graphql(
        "query ($id: ID!) { runOrError(runId: $id) { ... on Run { runConfigYaml } } }",
        {"id": run_id},
    )
    return dict(yaml.safe_load(data["runOrError"]["runConfigYaml"]) or {})


def wait_for_run(
    servers: Servers, run_id: str, expected: str = "SUCCESS", ui: Ui | None = None
) -> None:
    """Wait for the run to end ``expected``; with ``ui``, its pages rest meanwhile."""
    if ui is not None:
        ui.rest()

    def done() -> str | None:
        servers.check_alive()
        status = run_status(servers, run_id)
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    status = wait_until(f"run {run_id} to finish", done, RUN_TIMEOUT_S, every=RUN_POLL_S)
    assert status == expected, f"run {run_id} ended {status}; see {servers.artifacts}/dagster.log"


# --- page helpers ----------------------------------------------------------------------


def metadata_value(page: Any, key: str) -> Any:
    """The value cell of ``key`` in an asset page's metadata table."""
    label = page.get_by_text(key, exact=True).first
    expect(label).to_be_visible()
    cell = page.locator("tr").filter(has=page.get_by_text(key, exact=True)).first.locator("td")
    return cell.last


def show_row(page: Any, key: str, block: str = "center") -> None:
    """Scroll the metadata row of ``key`` into view, key column first."""
    label = page.locator("tr").filter(has=page.get_by_text(key, exact=True)).first
    label.evaluate(f"r => r.scrollIntoView({{block: '{block}', inline: 'start'}})")


def settle(page: Any) -> None:
    """Wait for the page's running CSS animations and transitions (a dialog fading in);
    one cancelled on the way (a menu closing) counts as finished."""
    page.evaluate("Promise.all(document.getAnimations().map(a => a.finished.catch(() => null)))")


def pick_partition(page: Any, scope: Any, key: str, tries: int = 3) -> None:
    """Pick the dataset partition ``key`` in the launchpad's Partition field (in
    ``scope``: the launchpad page, or its dialog).

    The field's menu lists the partitions once Dagster has loaded them; on a
    loaded machine the first opening can come up empty (two fresh-clone runs of the
    tutorial, and one of ``test_ui_browser.py`` at load 20, saw no item within 30 s).
    Typing the key filters the menu to it, and an empty menu is closed and opened
    again, up to ``tries`` times.
    """
    field = scope.get_by_placeholder("Partition")
    # The item's accessible name can repeat the key (label, and the tooltip when the
    # pointer rests on it): match the key, not the whole name.
    item = page.get_by_role("menuitem", name=key).first
    for attempt in range(tries):
        field.click()
        field.fill(key)
        try:
            item.wait_for(state="visible", timeout=15_000)
        except PlaywrightTimeoutError:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
            settle(page)
            continue
        item.click()
        return


def search_mlflow_runs(mlflow: Any, query: str, expected: str, tries: int = 3) -> None:
    """Type ``query`` into the MLflow runs page's search box and wait for the
    run count ``expected`` (a pattern such as ``r"^\\s*2 matching runs"``).

    On a loaded machine (the whole suite on two workers) the search once stayed
    at all of the experiment's runs for 30 s: the box took the text before its
    handler was bound, and Enter searched nothing. An unchanged count is
    searched again, up to ``tries`` times."""
    search = mlflow.get_by_placeholder("metrics.rmse", exact=False)
    expect(search).to_be_visible()
    count = mlflow.get_by_text("matching runs").locator("..")
    for attempt in range(tries):
        search.fill(query)
        search.press("Enter")
        try:
            expect(count).to_have_text(re.compile(expected), timeout=15_000)
            return
        except AssertionError:
            if attempt == tries - 1:
                raise


def open_asset(ui: Ui, servers: Servers, name: str) -> Any:
    page = ui.page
    page.goto(f"{servers.dagster_url}/assets/{name}")
    expect(page.get_by_text("Latest materialization")).to_be_visible()
    return page


def close_mlflow_assistant(mlflow: Any) -> None:
    """MLflow's assistant panel (open on a first visit) takes a third of the page."""
    close = mlflow.get_by_role("button", name="Close", exact=True)
    try:
        expect(close).to_be_visible(timeout=5_000)
        close.click()
    except AssertionError:
        pass


def open_launchpad(page: Any, materialize: Any) -> Any:
    """The menu beside a *Materialize all* button (``materialize``) → *Open launchpad*:
    returns the launchpad dialog, its config editor shown."""
    # The menu button drawn beside Materialize all (it has no text of its own).
    materialize.locator("xpath=../..").get_by_role("button").nth(1).click()
    page.get_by_role("menuitem", name="Open launchpad").click()
    dialog = page.get_by_role("dialog").filter(has_text="Launchpad")
    expect(dialog.locator(".CodeMirror")).to_be_visible()
    return dialog


def replace_config(page: Any, scope: Any, text: str) -> None:
    """Select all of the launchpad editor's text (in ``scope``: the launchpad page or
    its dialog) and type ``text`` instead; the editor then holds it and says *No errors*."""
    editor = scope.locator(".CodeMirror")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)
    page.keyboard.press("Control+Home")
    assert yaml.safe_load(editor.evaluate("e => e.CodeMirror.getValue()")) == yaml.safe_load(text)
    expect(scope.get_by_text("No errors")).to_be_visible()
    settle(page)
