import sys

from retrieval.cli.main import main

sys.exit(main())
