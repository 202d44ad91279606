from nczfs.cli import main

raise SystemExit(main())
