"""``python -m streaming run module:topology_factory --config app.properties``."""

import sys

from streaming.cli import main

sys.exit(main())
