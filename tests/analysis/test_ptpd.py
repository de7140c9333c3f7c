"""PTPd statistics lines (a slave's output captured in the lab)."""

import pytest

from selena.analysis.ptpd import (
    OffsetSample,
    max_abs_offset_us,
    offsets,
    synchronised,
    window_maxima,
)
from selena.errors import AnalysisError

LINES = """2026-11-25 17:46:28.651968 ptpd2[182].eth0 (notice) (slv) Received first Sync
# Timestamp, State, Clock ID, One Way Delay, Offset From Master, Slave to Master, Master to Slave
2026-11-25 17:46:14.749589, lstn_init,  1
2026-11-25 17:46:27.671735, slv, 029f21fffe000100(unknown)/1,  0.000000000,  0.000000000,  0.0, 0.0
2026-11-25 17:46:28.656321, slv, 029f21fffe000100(unknown)/1,  0.000000000,  0.002976783,  0.0, 0.0
2026-11-25 17:46:33.654596, slv, 029f21fffe000100(unknown)/1,  0.003367579, -0.001748962, -0.0, 0.0
2026-11-25 17:46:36.667044, slv, 029f21fffe000100(unknown)/1,  0.003716792,  0.006804042,  0.0, 0.0
2026-11-25 17:46:38.224350, s2026-11-25 17:46:39.441242 ptpd2[182].eth0 (info) shutting down
2026-11-25 17:46:39.447219, dsbl,
""".splitlines()


def test_only_the_slave_states_samples_are_read():
    samples = offsets(LINES)
    assert [s.offset_s for s in samples] == [0.0, 0.002976783, -0.001748962, 0.006804042]
    assert samples[1].t - samples[0].t == pytest.approx(0.984586)


def test_the_largest_offset_in_a_window_in_microseconds():
    samples = offsets(LINES)
    start = samples[0].t
    assert max_abs_offset_us(samples, start, start + 6.5) == pytest.approx(2976.783)
    assert max_abs_offset_us(samples, start + 5, start + 10) == pytest.approx(6804.042)
    with pytest.raises(AnalysisError, match="no PTPd offset samples"):
        max_abs_offset_us(samples, start + 20, start + 30)
    # The all-zero first sample is not a measurement.
    with pytest.raises(AnalysisError):
        max_abs_offset_us(samples, start, start + 0.5)


def test_a_clock_step_in_the_window_is_synchronisation_not_error():
    # Seen at TDF 10: a reset, a 1.15 s offset, PTPd steps the clock, a reset.
    samples = [OffsetSample(t, off) for t, off in
               ((10.0, 0.0), (10.3, 1.154971), (10.6, 0.0), (10.9, 0.001287), (11.2, -0.002))]
    assert [s.t for s in synchronised(samples, 10.0, 12.0)] == [10.9, 11.2]
    # Seen in the next run: a 2.98 s step with no reset after it; the stepped
    # clock stamps the later samples earlier than the step.
    samples = [OffsetSample(t, off) for t, off in
               ((10.0, 0.0), (13.3, 2.981666), (10.6, 0.000581), (10.9, -0.001238))]
    settled = synchronised(samples, 10.0, 20.0)
    assert [s.t for s in settled] == [10.6, 10.9]
    assert max_abs_offset_us(settled) == pytest.approx(1238.0)
    assert synchronised(samples[2:], 10.0, 20.0) == samples[2:]      # nothing to skip


def test_window_maxima_judge_idle_after_the_last_step_and_bulk_as_recorded():
    samples = [OffsetSample(100.0, 0.0), OffsetSample(101.0, 2.5),      # reset, step
               OffsetSample(99.5, 0.0002), OffsetSample(105.0, -0.0004),
               OffsetSample(121.0, 0.03), OffsetSample(130.0, -0.05), OffsetSample(141.0, 9.0)]
    idle, bulk = window_maxima(samples, 99.0, 120.0, 140.0)
    assert idle == pytest.approx(400.0) and bulk == pytest.approx(50000.0)
