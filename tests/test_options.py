"""Option grammar: explicit beats environment, exact switches, whole range-checked integers."""

import pytest

from attnkit.options import IntOption, Switch

SW = Switch("pv_split", "ATTNKIT_TEST_SWITCH", True, "test")
IO = IntOption("tiles_per_split", "ATTNKIT_TEST_INT", None, 1, 4096, "test")

# ONNX Runtime's review list of rejected strings for its switches
REJECTED_SWITCH = ["00", "01", "-0", "000001", "+1", " 1", "1 ", "2", "-1", "1x", "true"]


@pytest.mark.parametrize("raw", REJECTED_SWITCH)
def test_switch_rejects_strings_from_env_and_argument(raw):
    with pytest.raises(ValueError, match="ATTNKIT_TEST_SWITCH"):
        SW.resolve(environ={"ATTNKIT_TEST_SWITCH": raw})
    with pytest.raises(ValueError, match="pv_split"):
        SW.resolve(raw)


def test_switch_accepts_exactly_0_and_1_and_explicit_beats_env():
    assert SW.resolve(environ={"ATTNKIT_TEST_SWITCH": "0"}) is False
    assert SW.resolve(environ={"ATTNKIT_TEST_SWITCH": "1"}) is True
    assert SW.resolve(environ={"ATTNKIT_TEST_SWITCH": ""}) is True  # empty = unset
    assert SW.resolve(environ={}) is True
    assert SW.resolve(False, environ={"ATTNKIT_TEST_SWITCH": "1"}) is False
    assert SW.resolve("1", environ={"ATTNKIT_TEST_SWITCH": "0"}) is True
    with pytest.raises(ValueError):
        SW.resolve(1)  # an int is not a switch value


@pytest.mark.parametrize("raw", ["01", "-0", "+1", " 1", "1 ", "1x", "0x10", "1e3", "1.0", "", "-1", "4097", "0"])
def test_int_option_rejects(raw):
    if raw == "":
        assert IO.resolve(environ={"ATTNKIT_TEST_INT": raw}) is None  # empty = unset
        return
    with pytest.raises(ValueError, match="tiles_per_split"):
        IO.resolve(environ={"ATTNKIT_TEST_INT": raw})


def test_int_option_accepts_and_explicit_beats_env():
    assert IO.resolve(environ={"ATTNKIT_TEST_INT": "64"}) == 64
    assert IO.resolve(3, environ={"ATTNKIT_TEST_INT": "64"}) == 3
    assert IO.resolve("4096", environ={}) == 4096
    for bad in (True, 2.0, 0, 5000, "007"):
        with pytest.raises(ValueError):
            IO.resolve(bad, environ={})


def test_every_tuning_option_is_listed_once(monkeypatch):
    """attnkit env lists every option the ops read, each variable once, with the error a bad value raises."""
    from attnkit.env import tuning_options
    opts = tuning_options()
    envs = [o["env"] for o in opts]
    assert len(envs) == len(set(envs)) and all(e.startswith("ATTNKIT_") for e in envs)
    assert {"ATTNKIT_RELBIAS_SPLIT_LOOPS", "ATTNKIT_SPARSE_INT8_STAGES", "ATTNKIT_MQA_SWAPAB_PER_FORMAT",
            "ATTNKIT_MERGE_BLOCK_D"} <= set(envs)
    monkeypatch.setenv("ATTNKIT_MERGE_BLOCK_D", "+32")
    bad = next(o for o in tuning_options() if o["env"] == "ATTNKIT_MERGE_BLOCK_D")
    assert str(bad["now"]).startswith("error:") and "ATTNKIT_MERGE_BLOCK_D" in bad["now"]


def test_getenv_reads_the_environment_live(monkeypatch):
    """attnkit.options.getenv (the options' fast read) equals os.environ.get(name, "") for set, empty, unset and
    non-ASCII values, follows changes made between reads, and reads os.environ itself where it has been replaced."""
    import os
    from attnkit.options import getenv
    name = "ATTNKIT_TEST_GETENV_PROBE"
    monkeypatch.delenv(name, raising=False)
    assert getenv(name) == os.environ.get(name, "") == ""
    for v in ("1", "", "0", "12345", "caf\u00e9", " 1"):
        monkeypatch.setenv(name, v)
        assert getenv(name) == os.environ.get(name, "") == v
    monkeypatch.delenv(name)
    assert getenv(name) == ""
    monkeypatch.setattr(os, "environ", {name: "7"})
    assert getenv(name) == "7"


def test_committed_options_doc_is_what_report_generates(monkeypatch):
    """docs/options.md is generated from the option objects (attnkit report): the committed file equals what they
    give now, names every variable once (diagnostics included), and goes stale when an option is added."""
    import pathlib

    from attnkit import env
    from attnkit.mqa_decode import config as mqa_config
    from attnkit.options import Switch
    doc = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text()
    assert doc == env.options_reference(), "docs/options.md is stale: run `attnkit report`"
    for fam, obj in env._option_objects():
        assert doc.count(f"`{obj.env}`") == 1, obj.env
    monkeypatch.setattr(mqa_config, "PROBE_OPTION", Switch("probe", "ATTNKIT_MQA_PROBE", False, "a probe"),
                        raising=False)
    assert "ATTNKIT_MQA_PROBE" in env.options_reference() != doc


def test_every_module_defining_an_option_is_scanned():
    """attnkit env and docs/options.md walk env.OPTION_MODULES: no other module under src defines an option."""
    import pathlib
    import re

    from attnkit import env
    src = pathlib.Path(__file__).resolve().parents[1] / "src"
    defining = {".".join(p.relative_to(src).with_suffix("").parts) for p in src.rglob("*.py")
                if re.search(r"^\w+ = (Switch|IntOption)\(", p.read_text(), re.M) and p.name != "options.py"}
    assert defining == set(env.OPTION_MODULES), defining ^ set(env.OPTION_MODULES)


def test_options_doc_names_the_ops_that_take_each_keyword():
    """The doc's "keyword argument of" column: an op is named only where its signature (or mqa_decode_step's
    forwarding) takes the keyword; an option no op takes says so."""
    from attnkit import env
    rows = {line.split("|")[2].strip(" `"): line for line in env.options_reference().splitlines()
            if line.startswith("| `")}
    assert "mqa_write_records (as `loads_first`)" in rows["ATTNKIT_MQA_WRITER_LOADS_FIRST"]
    assert "none: the environment variable only" in rows["ATTNKIT_MQA_SWAPAB_WARPS"]
    assert "relbias_attention" not in rows["ATTNKIT_MQA_SWAPAB_WARPS"]
    assert "sparse_int8_attention" in rows["ATTNKIT_SPARSE_INT8_WARPS"]
    assert "mqa_decode_step" not in rows["ATTNKIT_MQA_PDL_EARLY_INPUTS"]
