"""scenarios/switch_model_fct.py without a lab: the flowgen command of each
profile's phase, with flowgen's per-flow timeout from SELENA_FCT_TIMEOUT (the
lab test bounds the Pica8 phase's tail with it), the phase's CSV kept with
its given-up flows, and the switch model swapped between the phases only."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from scenario_module import load_scenario

from selena.analysis.fct import read_flowgen_csv

CSV = ("flow,start_ns,end_ns,fct_s,bytes,status\n"
       "0,0,50000000,0.050000000,100000,ok\n"
       "1,10000000,4010000000,4.000000000,0,timeout\n")


class FakeExperiment:
    """Pings answer, flowgen prints CSV and exits 1 (a flow was given up)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir, self.tdf = out_dir, 10
        self.params: dict[str, str] = {}
        self.flowgen: list[tuple[list[str], float]] = []
        self.models: list[str] = []

    def start(self, node, argv, **_):
        return argv

    def set_switch_model(self, switch, profile):
        self.models.append(f"{switch} {profile} before flow {len(self.flowgen)}")

    def sleep(self, seconds):
        pass

    def cmd(self, node, command, timeout=None, **_):
        if isinstance(command, list) and command[:2] == ["flowgen", "client"]:
            self.flowgen.append((command, timeout))
            return SimpleNamespace(state="exited", exit_code=1, stdout=CSV.encode(),
                                   stderr=b"", summary=lambda: "exited 1")
        return SimpleNamespace(stdout=b"4 packets transmitted, 4 packets received")

    def kill(self, handle):
        pass

    def wait(self, handle, **_):
        pass


@pytest.mark.parametrize(("env", "want"), [(None, 30.0), ("4", 4.0)])
def test_each_phase_gives_flows_up_after_the_timeout_and_keeps_them_in_its_csv(
        monkeypatch, tmp_path, env, want):
    if env is None:
        monkeypatch.delenv("SELENA_FCT_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("SELENA_FCT_TIMEOUT", env)
    monkeypatch.setenv("SELENA_FCT_DURATION", "2")
    fct = load_scenario("switch_model_fct")            # reads the environment on load
    exp = FakeExperiment(tmp_path)
    fct.run(exp)
    assert len(exp.flowgen) == 2                       # ideal, then pica8-p3290
    for argv, timeout in exp.flowgen:
        assert argv[argv.index("--timeout") + 1] == f"{want:g}"
        assert argv[argv.index("--duration") + 1] == "2"
        assert timeout == 2 + want + 90                # exp.cmd outlives flowgen's last flow
    for profile in ("ideal", "pica8-p3290"):
        flows = read_flowgen_csv(tmp_path / f"fct-{profile}.csv")
        assert [f.status for f in flows] == ["ok", "timeout"]


def test_the_model_is_swapped_between_the_phases_not_before_the_first(monkeypatch, tmp_path):
    """s1 is deployed with the first profile: the first phase runs on it as
    deployed, and the model is restarted (its table emptied) for the next."""
    monkeypatch.setenv("SELENA_FCT_PROFILES", "ideal,pica8-p3290,ideal")
    fct = load_scenario("switch_model_fct")
    assert fct.s1.switch_model == "ideal"
    exp = FakeExperiment(tmp_path)
    fct.run(exp)
    assert exp.models == ["s1 pica8-p3290 before flow 1", "s1 ideal before flow 2"]
