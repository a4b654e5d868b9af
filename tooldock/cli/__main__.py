"""`python -m tooldock.cli`: the gateway image's entrypoint runs the CLI this way."""

import sys

from tooldock.cli import main

sys.exit(main())
