"""Shell text for lab tests that check output arrives as it comes: a
filter that passes its input on line by line and notes in a file when
each line came (Dom0's python3; the lab's shell has no `ts`)."""


def stamper(path: str) -> str:
    """A filter (`... | STAMPER`) writing `SECONDS LINE` per line to `path`."""
    return ("python3 -c 'import sys, time; f = open(\"" + path + "\", \"w\"); "
            "[(sys.stdout.write(l), sys.stdout.flush(), f.write(\"%.3f %s\" % (time.time(), l)), "
            "f.flush()) for l in sys.stdin]'")
