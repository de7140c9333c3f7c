"""The lab tests' failure messages lead with the check programs' failures."""

from lab_output import failures_first

TABLE = "".join(f"row {i}  yes\n" for i in range(40))


def test_failed_blocks_come_first_and_the_whole_output_follows():
    output = (f"{TABLE}\nFAILED:\n  TDF 2.5: vCPU 1 after change 2 to TDF 8: too few samples\n"
              "check-clock-rc=1\n"
              f"{TABLE}\nFAILED:\n  TDF 5: poll 300 ms vCPU 0: real s: 5.3\n  TDF 5: steal\n"
              "check-clock-pvh-rc=1\n")
    message = failures_first(output)
    head = message.splitlines()[:5]
    assert head == ["FAILED:", "  TDF 2.5: vCPU 1 after change 2 to TDF 8: too few samples",
                    "  TDF 5: poll 300 ms vCPU 0: real s: 5.3", "  TDF 5: steal",
                    "--- the whole output:"]
    assert message.endswith(output)


def test_output_without_failures_is_unchanged():
    output = f"{TABLE}\nall clocks and timers follow the TDF\ncheck-clock-rc=0\n"
    assert failures_first(output) == output
