#!/usr/bin/env python3
"""The benchmarks' fake OpenAI server: ``hub.testing.openai``, the one the tests use too.

    python bench/fake_openai.py --port 0 --latency 0 --chunk 8 --script FILE

is the same as ``python -m hub.testing.openai ...``; see that module for the endpoints and
the script format.
"""

import sys

from hub.testing.openai import main

if __name__ == "__main__":
    sys.exit(main())
