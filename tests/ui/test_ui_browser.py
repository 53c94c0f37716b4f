"""Real-browser tests of the Dagster UI and the MLflow UI (Playwright driving Debian's Chromium).

The module starts the servers the README's way, once: ``dagster dev -w workspace.yaml``
(webserver + daemon) with a temporary ``DAGSTER_HOME`` (a copy of
``pipelines/dagster.yaml``) and data root, and ``mlflow ui`` on that data root's
SQLite store, both on free ports of 127.0.0.1. The tests then run in file order, as
a user would: open the ``gnn`` asset graph (``train_job``'s assets), click
*Materialize all*, add the dataset partition ``synthetic`` in its dialog (*Add a
partition*) and see it picked, then launch the same Materialize all from its
launchpad (the menu beside the button) for that partition on a small generated
graph (``SMALL_RUN``: 2,000 nodes, 3 epochs, in one process; the dialog itself would
run the library's defaults, 20,000 nodes and 20 epochs), wait until every asset of
the group is materialized for it and every check passed, read the trained model's metadata
(accuracy, MLflow link, the embedded training curves) and the partition's edge
cut, launch ``train_job`` for ``synthetic`` from the launchpad with edited config
(LDG into 2 parts instead of METIS into 4), and compare the two training runs in the MLflow UI.

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

import re
import shutil
import urllib.parse
from collections.abc import Iterator

import pytest
import yaml

pytestmark = pytest.mark.browser

from tests.ui.helpers import (  # noqa: E402  (skips the module without Chromium or Playwright)
    ARTIFACTS_ROOT,
    GROUP,
    JOB,
    LOCATION,
    Findings,
    Servers,
    Ui,
    asset_name,
    checks_of,
    close_mlflow_assistant,
    expect,
    group_state,
    metadata_value,
    open_asset,
    open_browser,
    open_launchpad,
    pick_partition,
    replace_config,
    run_config,
    run_ids,
    run_servers,
    run_tags,
    search_mlflow_runs,
    settle,
    show_row,
    wait_for_run,
    wait_until,
)

ARTIFACTS = ARTIFACTS_ROOT / "ui"
#: The dataset partition the tests add and materialize (the generated graph's).
DATASET = "synthetic"
#: The README's screenshots: artifact name -> docs/img name.
#: The config of the file's first run, typed into the launchpad of Materialize all: every
#: asset and check of the group on a 2,000-node graph (the default 20,000 nodes, 8
#: classes, 64 features), 3 epochs (0.80 test accuracy; the default 20 took 84 s of
#: training at load 15), all steps in one process (each forked step imports torch and
#: the code location again: 4 to 56 s a step at load 15). The launchpad run trains 6.
NUM_NODES = 2000
SMALL_RUN = {
    "ops": {
        "raw_dataset": {"config": {"num_nodes": NUM_NODES}},
        "trained_model": {"config": {"node": {"epochs": 3}}},
    },
    "execution": {"config": {"in_process": {}}},
}
DOCS_SHOTS = {
    "02-asset-graph-materialized.png": "dagster-asset-graph.png",
    "09-mlflow-compare.png": "mlflow-compare.png",
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """``make ui`` and ``make mlflow-ui`` on a temporary DAGSTER_HOME and data root."""
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with run_servers(tmp_path_factory.mktemp("ui"), ARTIFACTS) as state:
        yield state


@pytest.fixture(scope="module")
def ui(servers: Servers) -> Iterator[Ui]:
    with open_browser(ARTIFACTS, DOCS_SHOTS) as browser:
        yield browser


# --- the tests, in the order a user goes --------------------------------------------------

#: Filled by the tests as they go; later tests read what earlier ones found.
FOUND = Findings()
need = FOUND.need


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
    materialize = page.get_by_role("button", name="Materialize all")
    materialize.click()
    # Every asset is partitioned by dataset: the dialog asks for a partition. A new user
    # adds one (Add a partition), then picks it in the partition selector.
    dialog = page.get_by_role("dialog").filter(has_text="Launch runs to materialize")
    dialog.get_by_text("Add a partition", exact=True).click()
    add = page.get_by_role("dialog").filter(has_text="Add a partition for")
    add.get_by_placeholder("name").fill(DATASET)
    ui.shot("01a-add-partition.png", page)
    add.get_by_role("button", name="Save").click()
    expect(add).to_have_count(0)
    # The new partition is selected once the dialog has reloaded the partition list;
    # if it is not (yet), pick it as a user would.
    selected = dialog.get_by_text("1 partition", exact=True)
    try:
        expect(selected).to_be_visible(timeout=5_000)
    except AssertionError:
        dialog.get_by_text("Select a partition or create one").click()  # none selected
        # The item's accessible name repeats the key (label and tooltip).
        page.get_by_role("menuitem", name=DATASET).first.click()
        page.keyboard.press("Escape")  # closes the selector's menu, not the dialog
    expect(selected).to_be_visible()
    expect(dialog.get_by_role("button", name="Launch 1 run")).to_be_enabled()
    ui.shot("01b-materialize-all-partition-picked.png", page)
    # The dialog would launch the library's defaults (the 20,000-node graph, 20 epochs,
    # a forked process per step: most of this file's time). The same Materialize all,
    # opened in the launchpad (the menu beside the button), runs the same selection of
    # the same partition on the small graph of SMALL_RUN (docs/TESTING.md).
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    launchpad = open_launchpad(page, materialize)
    pick_partition(page, launchpad, DATASET)
    expect(launchpad.get_by_placeholder("Partition")).to_have_value(DATASET)
    # Picking a partition reloads the editor with that partition's config: edit after it.
    page.wait_for_load_state("networkidle")
    settle(page)
    replace_config(page, launchpad, yaml.safe_dump(SMALL_RUN, sort_keys=False))
    ui.shot("01c-launchpad-small-run.png", page)
    page.get_by_role("button").filter(has_text=re.compile("^Materialize$")).click()
    expect(launchpad).to_have_count(0, timeout=180_000)
    ui.shot("01d-materialize-all-launched.png", page)
    new = wait_until("the launched run", lambda: run_ids(servers) - before, 120)
    assert len(new) == 1, new
    (run_id,) = new
    FOUND["first_run"] = run_id
    assert run_tags(servers, run_id).get("dagster/partition") == DATASET
    launched = run_config(servers, run_id)
    assert (launched["ops"], launched["execution"]) == (SMALL_RUN["ops"], SMALL_RUN["execution"])
    wait_for_run(servers, run_id, ui=ui)

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

    # What the user sees: every node's one partition drawn as materialized (the
    # partition bar "100% filled", "1 partition" in green), every check as passed. (The
    # launch opened the run's page: back to the group's graph.)
    page.goto(f"{servers.dagster_url}/locations/{LOCATION}/asset-groups/{GROUP}")
    page.wait_for_load_state("networkidle")
    expect(page.get_by_text("100% filled", exact=True)).to_have_count(len(nodes), timeout=60_000)
    expect(page.get_by_text("1 partition", exact=True)).to_have_count(len(nodes))
    passed = page.get_by_text(re.compile(r"^\d+ / \d+ Passed$"))
    expect(passed).to_have_count(sum(1 for n in nodes if checks_of(n)))
    for i in range(passed.count()):
        done, total = re.findall(r"\d+", passed.nth(i).inner_text())
        assert done == total, passed.nth(i).inner_text()
    ui.shot("02-asset-graph-materialized.png", page)
    ui.rest()  # the graph page is not looked at again
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
    # The run is of a dataset partition: the one the first test added.
    pick_partition(page, page, DATASET)
    expect(page.get_by_placeholder("Partition")).to_have_value(DATASET)
    page.wait_for_load_state("networkidle")  # the partition's config replaces the editor's
    settle(page)
    # The launchpad opens with every default expanded: the generated demo graph.
    config = yaml.safe_load(editor.evaluate("e => e.CodeMirror.getValue()"))
    raw = config["ops"]["raw_dataset"]["config"]
    assert (raw["source"], raw["num_nodes"]) == ("", 20000), raw
    partition = config["ops"]["graph_partition"]["config"]
    assert (partition["method"], partition["parts"]) == ("metis", 4), partition
    # The edit: LDG into 2 parts; the first run's graph (its ingestion is reused) and 6
    # epochs (the quality gate compares with the first run's 3-epoch model: 1 epoch on
    # this graph validated worse, and the run failed at the gate); run links point at
    # this test's MLflow UI; steps run in one process (the default forks a Python per
    # step: seconds each under load). The editor's expanded defaults hold the
    # multiprocess executor: replace it (placed before them, the editor's own execution
    # key won and the steps still forked).
    assert "multiprocess" in config["execution"]["config"], config["execution"]
    partition.update(method="ldg", parts=2)
    raw["num_nodes"] = NUM_NODES
    config["ops"]["trained_model"]["config"]["node"]["epochs"] = 6
    config["resources"]["mlflow"]["config"]["ui_url"] = servers.mlflow_url
    edited = {**config, "execution": {"config": {"in_process": {}}}}
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
    assert run_tags(servers, run_id).get("dagster/partition") == DATASET
    launched = servers.graphql(
        "query ($id: ID!) { runOrError(runId: $id) { ... on Run { runConfigYaml } } }",
        {"id": run_id},
    )["runOrError"]["runConfigYaml"]
    assert yaml.safe_load(launched)["execution"] == edited["execution"], launched
    wait_for_run(servers, run_id, ui=ui)
    page.goto(f"{servers.dagster_url}/runs/{run_id}")  # back to the run's page
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
    close_mlflow_assistant(mlflow)
    ui.shot("08-mlflow-training-run.png", mlflow)

    # The experiment's runs, narrowed to the training runs; select both, compare.
    mlflow.locator("a[href$='/runs']").filter(has_text="gnncore").first.click()
    search_mlflow_runs(mlflow, "tags.dagster_asset = 'trained_model'", r"^\s*2 matching runs")
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
