"""`python -m bench`: run the benchmark and print the table."""

import sys

from bench.cli import main

sys.exit(main())
