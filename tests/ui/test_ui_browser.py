"""Real-browser tests of the Dagster UI and the MLflow UI (Playwright driving Debian's Chromium).

The module starts the servers the README's way, once: ``dagster dev -w workspace.yaml``
(webserver + daemon) with a temporary ``DAGSTER_HOME`` (a copy of
``pipelines/dagster.yaml``) and data root, and ``mlflow ui`` on that data root's
SQLite store, both on free ports of 127.0.0.1. The tests then run in file order, as
a user would: open the ``gnn`` asset graph (``train_job``'s assets), click
*Materialize all*, wait until every asset of the group is materialized and every
check passed, read the trained model's metadata (accuracy, MLflow link, the
embedded training curves) and the partition's edge cut, launch ``train_job`` from
the launchpad with edited config (LDG into 2 parts instead of METIS into 4), and
compare the two training runs in the MLflow UI.

GraphQL (the webserver's own API) is the oracle beside the pages: it says which
assets and checks belong to the group and when the runs are done. Screenshots of
every step go to ``$GNNCORE_TEST_ARTIFACTS/ui`` (default ``test-artifacts/ui``), with
the servers' logs; ``GNNCORE_UPDATE_DOCS_IMG=1`` also copies the README's three
screenshots into ``docs/img/``.

Skips (saying why) where Chromium (``$GNNCORE_CHROMIUM``, default
``/usr/bin/chromium``) or the ``playwright`` package is missing; ``make test``'s
``sysdeps`` step installs Chromium. Playwright's own browser download is not used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("GNNCORE_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("GNNCORE_TEST_ARTIFACTS") or REPO / "test-artifacts") / "ui"
DOCS_IMG = REPO / "docs" / "img"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.browser

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
RUN_TIMEOUT_S = 360.0
SERVER_TIMEOUT_S = 180.0
#: The README's screenshots: artifact name -> docs/img name.
DOCS_SHOTS = {
    "02-asset-graph-materialized.png": "dagster-asset-graph.png",
    "09-mlflow-compare.png": "mlflow-compare.png",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL whatever of the session is left
        (``dagster dev`` can take a long while to wind down its children)."""
        sid = self.proc.pid
        if self.proc.poll() is None:
            os.killpg(sid, signal.SIGTERM)
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


def start(name: str, argv: list[str], env: dict[str, str], logs: Path) -> Server:
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
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


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """``make ui`` and ``make mlflow-ui`` on a temporary DAGSTER_HOME and data root."""
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    base = tmp_path_factory.mktemp("ui")
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
        f"http://127.0.0.1:{dagster_port}", f"http://127.0.0.1:{mlflow_port}", mlflow_port, data
    )
    state.servers.append(
        start(
            "dagster",
            [str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1"]
            + ["-p", str(dagster_port)],
            env,
            ARTIFACTS,
        )
    )
    state.servers.append(
        start(
            "mlflow",
            [str(BIN / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{data}/mlflow/mlflow.db"]
            + ["--default-artifact-root", f"{data}/mlflow/artifacts"]
            + ["--host", "127.0.0.1", "--port", str(mlflow_port)],
            env,
            ARTIFACTS,
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
        for server in reversed(state.servers):
            server.stop()


@dataclass
class Ui:
    """The browser: a normal 1280×800 page, and a large page drawn at 0.625 scale (also
    1280×800 pixels) on which the asset graph is drawn with full-size nodes."""

    page: Any
    graph_page: Any
    shots: list[str] = field(default_factory=list)

    def shot(self, name: str, page: Any = None) -> Path:
        path = ARTIFACTS / name
        (page or self.page).screenshot(path=str(path))
        self.shots.append(name)
        return path


@pytest.fixture(scope="module")
def ui(servers: Servers) -> Iterator[Ui]:
    with sync_api.sync_playwright() as playwright:
        # A fresh temporary profile (user-data-dir) per launch; the driver ships in the wheel.
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        pages = []
        for viewport, scale in (((1280, 800), 1.0), ((2048, 1280), 0.625)):
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=scale
            )
            # Dagster's first-visit "join the community" dialog would cover the page.
            context.add_init_script("window.localStorage.setItem('communityNux', '\"1\"')")
            context.set_default_timeout(30_000)
            pages.append(context.new_page())
        try:
            yield Ui(pages[0], pages[1])
        finally:
            browser.close()
    if os.environ.get("GNNCORE_UPDATE_DOCS_IMG"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for shot, name in DOCS_SHOTS.items():
            if (ARTIFACTS / shot).exists():
                shutil.copy(ARTIFACTS / shot, DOCS_IMG / name)


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


def run_status(servers: Servers, run_id: str) -> str:
    data = servers.graphql(
        "query ($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
    )
    return str(data["runOrError"]["status"])


def wait_for_run(servers: Servers, run_id: str) -> None:
    def done() -> str | None:
        servers.check_alive()
        status = run_status(servers, run_id)
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    status = wait_until(f"run {run_id} to finish", done, RUN_TIMEOUT_S, every=3.0)
    assert status == "SUCCESS", f"run {run_id} ended {status}; see {ARTIFACTS}/dagster.log"


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
    """Wait for the page's running CSS animations and transitions (a dialog fading in)."""
    page.evaluate("Promise.all(document.getAnimations().map(a => a.finished))")


def open_asset(ui: Ui, servers: Servers, name: str) -> Any:
    page = ui.page
    page.goto(f"{servers.dagster_url}/assets/{name}")
    expect(page.get_by_text("Latest materialization")).to_be_visible()
    return page


# --- the tests, in the order a user goes --------------------------------------------------

#: Filled by the tests as they go; later tests read what earlier ones found.
FOUND: dict[str, Any] = {}


def need(*keys: str) -> None:
    """Skip a step whose earlier steps failed (the failure is reported there)."""
    missing = [k for k in keys if k not in FOUND]
    if missing:
        pytest.skip(f"an earlier step failed before finding {', '.join(missing)}")


def test_asset_graph_shows_the_train_job_chain(servers: Servers, ui: Ui) -> None:
    nodes = group_state(servers)
    names = sorted(asset_name(n) for n in nodes)
    assert {"raw_dataset", "graph", "trained_model"} <= set(names), names
    # The group's Materialize all is train_job's chain, nothing of partition_comparison_job.
    assert all(JOB in n["jobNames"] for n in nodes), [(asset_name(n), n["jobNames"]) for n in nodes]
    FOUND["assets"] = names
    page = ui.graph_page
    page.goto(f"{servers.dagster_url}/locations/{LOCATION}/asset-groups/{GROUP}")
    page.wait_for_load_state("networkidle")
    page.get_by_text("Hide navigation").click()
    for name in names:
        expect(page.get_by_text(name, exact=True).first).to_be_visible()
    expect(page.get_by_role("button", name="Materialize all")).to_be_enabled()
    ui.shot("01-asset-graph.png", page)


def test_materialize_all_materializes_every_asset_and_passes_every_check(
    servers: Servers, ui: Ui
) -> None:
    need("assets")
    page = ui.graph_page
    before = run_ids(servers)
    page.get_by_role("button", name="Materialize all").click()
    expect(page.get_by_text("Launched run")).to_be_visible()
    ui.shot("01b-materialize-all-launched.png", page)
    new = wait_until("the launched run", lambda: run_ids(servers) - before, 60)
    assert len(new) == 1, new
    (run_id,) = new
    FOUND["first_run"] = run_id
    wait_for_run(servers, run_id)

    nodes = group_state(servers)
    assert sorted(asset_name(n) for n in nodes) == FOUND["assets"]
    for node in nodes:
        mats = node["assetMaterializations"]
        assert mats and mats[0]["runId"] == run_id, f"{asset_name(node)} not materialized"
        for check in checks_of(node):
            execution = check["executionForLatestMaterialization"]
            assert execution and execution["status"] == "SUCCEEDED", (asset_name(node), check)
            assert execution["evaluation"]["success"] is True, (asset_name(node), check)
    n_checks = sum(len(checks_of(n)) for n in nodes)
    assert n_checks >= 4

    # What the user sees: every node drawn as materialized, every check as passed.
    page.reload()
    page.wait_for_load_state("networkidle")
    expect(page.get_by_text("Materialized", exact=True)).to_have_count(len(nodes), timeout=60_000)
    passed = page.get_by_text(re.compile(r"^\d+ / \d+ Passed$"))
    expect(passed).to_have_count(sum(1 for n in nodes if checks_of(n)))
    for i in range(passed.count()):
        done, total = re.findall(r"\d+", passed.nth(i).inner_text())
        assert done == total, passed.nth(i).inner_text()
    ui.shot("02-asset-graph-materialized.png", page)
    FOUND["materialized"] = True


def test_partition_metadata_shows_the_edge_cut(servers: Servers, ui: Ui) -> None:
    need("materialized")
    page = open_asset(ui, servers, "graph_partition")
    cut = float(metadata_value(page, "edge_cut_fraction").inner_text())
    assert 0.0 < cut < 0.5, cut
    assert metadata_value(page, "method").inner_text().strip() == "metis"
    FOUND["metis_cut"] = cut
    show_row(page, "edge_cut_fraction")
    ui.shot("03-graph-partition-edge-cut.png")


def test_trained_model_metadata_has_accuracy_mlflow_link_and_curves(
    servers: Servers, ui: Ui
) -> None:
    need("materialized")
    page = open_asset(ui, servers, "trained_model")
    accuracy = float(metadata_value(page, "test_accuracy").inner_text())
    assert 0.5 < accuracy <= 1.0, accuracy  # 8 planted classes: chance is 0.125
    run_id = metadata_value(page, "mlflow_run_id").inner_text().strip()
    link = metadata_value(page, "mlflow_run").get_by_role("link", name=re.compile("^http"))
    href = str(link.get_attribute("href"))
    match = re.fullmatch(r"https?://[^/]+/#/experiments/(\d+)/runs/([0-9a-f]{32})", href)
    assert match, href
    assert match.group(2) == run_id
    # The link names the run the MLflow store holds (the resource's ui_url is :5000 by
    # default; the run is checked through the UI server of this test).
    run = servers.mlflow_api(f"runs/get?run_id={run_id}")["run"]
    assert run["info"]["experiment_id"] == match.group(1)
    tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
    assert tags["dagster_asset"] == "trained_model"
    assert tags["dagster_run_id"] == FOUND["first_run"]
    metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
    assert metrics["test_accuracy"] == pytest.approx(accuracy)
    FOUND["first_training_run"] = run_id
    show_row(page, "best_epoch")  # test_accuracy down to the mlflow_run link
    ui.shot("04-trained-model-metadata.png")

    # The training curves are embedded as a markdown image.
    show_row(page, "curves")
    metadata_value(page, "curves").get_by_text("Show Markdown").click()
    dialog = page.get_by_role("dialog")
    image = dialog.locator("img")
    expect(image).to_be_visible()
    settle(page)
    width, height, src = image.evaluate("i => [i.naturalWidth, i.naturalHeight, i.src]")
    assert width > 100 and height > 100, (width, height)
    assert src.startswith("data:image/png;base64,"), src[:40]
    ui.shot("05-trained-model-curves.png")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)


def test_launchpad_run_with_another_partitioner(servers: Servers, ui: Ui) -> None:
    need("materialized", "metis_cut")
    page = ui.page
    page.goto(f"{servers.dagster_url}/locations/{LOCATION}/jobs/{JOB}/playground")
    page.wait_for_load_state("networkidle")
    editor = page.locator(".CodeMirror")
    expect(editor).to_be_visible()
    # The launchpad opens with every default expanded: the generated demo graph.
    config = yaml.safe_load(editor.evaluate("e => e.CodeMirror.getValue()"))
    raw = config["ops"]["raw_dataset"]["config"]
    assert (raw["source"], raw["num_nodes"]) == ("", 20000), raw
    partition = config["ops"]["graph_partition"]["config"]
    assert (partition["method"], partition["parts"]) == ("metis", 4), partition
    # The edit: LDG into 2 parts; run links point at this test's MLflow UI; steps run in
    # one process (the default starts a Python per step: ~8 s each on a small machine).
    partition.update(method="ldg", parts=2)
    config["resources"]["mlflow"]["config"]["ui_url"] = servers.mlflow_url
    edited = {"execution": {"config": {"in_process": {}}}, **config}
    text = yaml.safe_dump(edited, sort_keys=False)
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)
    page.keyboard.press("Control+Home")
    assert yaml.safe_load(editor.evaluate("e => e.CodeMirror.getValue()")) == edited
    expect(page.get_by_text("No errors")).to_be_visible()
    ui.shot("06-launchpad-edited-config.png")

    before = run_ids(servers)
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    run_id = page.url.rstrip("/").split("/")[-1].split("?")[0]
    assert run_id not in before
    wait_for_run(servers, run_id)
    expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=60_000)
    ui.shot("07-launchpad-run-succeeded.png")

    page = open_asset(ui, servers, "graph_partition")
    expect(metadata_value(page, "method")).to_have_text("ldg")
    expect(metadata_value(page, "parts")).to_have_text("2")
    cut = float(metadata_value(page, "edge_cut_fraction").inner_text())
    assert cut > FOUND["metis_cut"], (cut, FOUND["metis_cut"])  # METIS cuts less than LDG
    FOUND["second_run"] = run_id


def test_mlflow_compares_the_two_training_runs(servers: Servers, ui: Ui) -> None:
    need("first_training_run", "second_run")
    # Follow the trained model's MLflow link (now pointing at this test's MLflow UI).
    page = open_asset(ui, servers, "trained_model")
    second = metadata_value(page, "mlflow_run_id").inner_text().strip()
    assert second != FOUND["first_training_run"]
    run = servers.mlflow_api(f"runs/get?run_id={second}")["run"]
    tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
    assert tags["dagster_run_id"] == FOUND["second_run"]
    link = metadata_value(page, "mlflow_run").get_by_role("link", name=re.compile("^http"))
    assert str(link.get_attribute("href")).startswith(servers.mlflow_url + "/#/")
    with page.context.expect_page() as opened:
        link.click()
    mlflow = opened.value
    expect(mlflow.get_by_text("test_accuracy", exact=True).first).to_be_visible(timeout=60_000)
    expect(mlflow.get_by_text(second).first).to_be_visible()
    # MLflow's assistant panel (open on a first visit) takes a third of the page.
    close = mlflow.get_by_role("button", name="Close", exact=True)
    try:
        expect(close).to_be_visible(timeout=5_000)
        close.click()
    except AssertionError:
        pass
    ui.shot("08-mlflow-training-run.png", mlflow)

    # The experiment's runs, narrowed to the training runs; select both, compare.
    mlflow.locator("a[href$='/runs']").filter(has_text="gnncore").first.click()
    search = mlflow.get_by_placeholder("metrics.rmse", exact=False)
    expect(search).to_be_visible()
    search.fill("tags.dagster_asset = 'trained_model'")
    search.press("Enter")
    expect(mlflow.get_by_text("matching runs").locator("..")).to_have_text(
        re.compile(r"^\s*2 matching runs")
    )
    for run_id in (FOUND["first_training_run"], second):
        # ag-grid draws a row in two halves (pinned columns); both carry the run id.
        row = mlflow.locator(f"[role=row][row-id='{run_id}']").filter(
            has=mlflow.locator("input.ag-checkbox-input")
        )
        row.locator("input.ag-checkbox-input").check()
    mlflow.get_by_role("button", name="Compare").click()
    expect(mlflow.get_by_text("Comparing 2 Runs")).to_be_visible()
    compared = re.findall(r"[0-9a-f]{32}", urllib.parse.unquote(mlflow.url))
    assert set(compared) == {FOUND["first_training_run"], second}, mlflow.url
    expect(mlflow.get_by_text("Run details")).to_be_visible()
    ui.shot("09-mlflow-compare.png", mlflow)
    mlflow.get_by_role("switch", name="Parameters - Show diff only").click()
    mlflow.get_by_text("Run details").scroll_into_view_if_needed()
    ui.shot("10-mlflow-compare-details.png", mlflow)
    mlflow.close()
