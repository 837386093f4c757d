import sys

from trainbus.cli import main

sys.exit(main())
