import sys

from kibitz.server.cli import main

sys.exit(main())
