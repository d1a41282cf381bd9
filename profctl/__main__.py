from profctl.cli import main

main()
