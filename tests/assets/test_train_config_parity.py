"""One declaration per training option: library, CLI and Dagster agree on every default,
and every library option can be set from the CLI and from Dagster."""

from __future__ import annotations

import typing
from typing import Any

import dagster as dg
import pytest

from assets.train_config import FROM_RESOURCES, TASK_CONFIGS, TrainConfig
from gnncore.cli.main import verb_parser
from gnncore.cli.train import build_config, config_options
from gnncore.options import OptionSpec, describe_options
from resources import ComputeResource

TASKS = ("node", "link")


def _cli_config(*argv: str) -> Any:
    parser, _ = verb_parser("train")
    return build_config(parser.parse_args(["graph", *argv]))


@pytest.mark.parametrize("task", TASKS)
def test_library_cli_and_dagster_defaults_are_identical(task: str) -> None:
    library = TASK_CONFIGS[task]().validate()
    cli = _cli_config("--task", task)
    dagster = TrainConfig(task=task).build(device=ComputeResource().device)
    assert library.to_dict() == cli.to_dict() == dagster.to_dict()


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model", ["sage", "gcn", "gat", "gin", "none"])
def test_per_model_defaults_agree_for_every_model(task: str, model: str) -> None:
    library = TASK_CONFIGS[task](model=model).validate()
    cli = _cli_config("--task", task, "--model", model)
    options = {"model": model}
    dagster = TrainConfig(task=task, **{task: options}).build(device="auto")
    assert library.to_dict() == cli.to_dict() == dagster.to_dict()


def _other_value(spec: OptionSpec) -> Any:
    """A valid value of ``spec`` different from its default (per-model: any value)."""
    default = spec.default
    if spec.kind == "bool":
        return not default
    if spec.kind == "choice":
        return next(c for c in spec.choices if c != default)
    if spec.kind == "ints":
        return (7,) if default != (7,) else (8,)
    if spec.kind == "int":
        return (default or 0) + 3
    if spec.kind == "float":
        return 0.25 if default != 0.25 else 0.5
    assert spec.kind == "str", spec
    return "cpu" if default != "cpu" else "auto"


def _cli_text(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


@pytest.mark.parametrize("task", TASKS)
def test_every_library_option_can_be_set_from_the_cli_and_dagster(task: str) -> None:
    parser, _ = verb_parser("train")
    for spec in describe_options(TASK_CONFIGS[task]):
        value = _other_value(spec)
        if spec.kind == "bool":
            argv = [spec.flag if value else "--no-" + spec.flag[2:]]
        else:
            argv = [spec.flag, _cli_text(value)]
        given = config_options(parser.parse_args(["graph", "--task", task, *argv]))
        assert given == {spec.name: value}, spec.name

        if spec.name in FROM_RESOURCES:
            assert spec.name == "device"  # set on the compute resource, one place per deployment
            continue
        plain = list(value) if isinstance(value, tuple) else value
        launchpad = TrainConfig(task=task, **{task: {spec.name: plain}})
        built = TASK_CONFIGS[task](**launchpad.options())
        assert getattr(built, spec.name) == value, spec.name


def test_choice_options_are_literals_the_launchpad_shows_as_enums() -> None:
    schema = TrainConfig.to_config_schema().as_field().config_type
    node_fields = schema.fields["node"].config_type.fields
    link_fields = schema.fields["link"].config_type.fields
    for fields, task in ((node_fields, "node"), (link_fields, "link")):
        for spec in describe_options(TASK_CONFIGS[task]):
            if spec.choices:
                config_type = fields[spec.name].config_type
                assert config_type.kind.name == "ENUM", spec.name
                assert tuple(v.config_value for v in config_type.enum_values) == spec.choices


def test_the_launchpad_and_cli_tasks_are_the_library_s() -> None:
    from gnncore.cli.train import _task_options

    task_field = TrainConfig.model_fields["task"]
    assert typing.get_args(task_field.annotation) == tuple(TASK_CONFIGS)
    assert tuple(_task_options()) == tuple(TASK_CONFIGS)


def test_the_choice_types_name_what_the_library_accepts() -> None:
    from gnncore.sampler.factory import SAMPLER_MODES
    from gnncore.sampler.negative import NEGATIVE_MODES
    from gnncore.train import DECODERS, MODELS
    from gnncore.train.core.models import ModelName

    assert tuple(MODELS) == typing.get_args(ModelName)
    choices = {spec.name: spec.choices for spec in describe_options(TASK_CONFIGS["link"])}
    assert choices["decoder"] == DECODERS and choices["sampler"] == SAMPLER_MODES
    assert choices["negative_sampling"] == NEGATIVE_MODES


def test_an_option_of_the_other_task_is_named_in_the_error() -> None:
    from gnncore.errors import GnnCoreError

    with pytest.raises(GnnCoreError, match="--dim: not used by --task node"):
        _cli_config("--task", "node", "--dim", "8")
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(_job(), {"ops": {"trained_model": {"config": {"node": {"dim": 8}}}}})


def _job() -> dg.JobDefinition:
    from pipelines.definitions import defs

    return defs.resolve_job_def("train_job")


def test_cli_spellings_beyond_the_field_names() -> None:
    assert _cli_config("--task", "link", "--negatives", "64").num_negatives == 64
    assert _cli_config("--amp").amp == "bf16"  # a bare --amp means bfloat16
    assert _cli_config("--amp", "fp16").amp == "fp16"
    assert _cli_config("--eval-fanouts", "all").eval_fanouts is None
    assert _cli_config("--eval-fanouts", "5,5").eval_fanouts == (5, 5)
    assert _cli_config("--task", "link", "--no-reciprocal").reciprocal is False


def test_a_checkpoint_from_before_an_option_existed_still_resumes() -> None:
    """A missing option counts as its declared default (what that run used)."""
    from gnncore.train import ConfigError, NodeTrainConfig

    config = NodeTrainConfig().validate()
    old = {k: v for k, v in config.to_dict().items() if k != "max_grad_norm"}
    assert config.mismatches(old) == []
    clipped = NodeTrainConfig(max_grad_norm=1.0)
    assert clipped.mismatches(old) == ["max_grad_norm: 0.0 (checkpoint) != 1.0 (this run)"]
    with pytest.raises(ConfigError, match="max_grad_norm"):
        NodeTrainConfig(max_grad_norm=float("inf")).validate()


def test_launchpad_choices_survive_yaml_unquoted():
    """The launchpad scaffolds choices unquoted; YAML 1.1 reads off/on/yes/no as
    booleans, which the launchpad then rejects ("must be a string")."""
    import typing

    import yaml

    from gnncore.options import describe_options
    from gnncore.plan import PlacementSettings, ReplicationSettings
    from gnncore.train import LinkTrainConfig, NodeTrainConfig

    for cls in (NodeTrainConfig, LinkTrainConfig, PlacementSettings, ReplicationSettings):
        for spec in describe_options(cls):
            if typing.get_origin(spec.python_type) is typing.Literal:
                for choice in typing.get_args(spec.python_type):
                    assert yaml.safe_load(f"v: {choice}")["v"] == choice, (cls, spec.name)
