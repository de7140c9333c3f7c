import sys

from selena.cli import main

sys.exit(main())
