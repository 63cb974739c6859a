from kvplan.cli.app import main

main()
