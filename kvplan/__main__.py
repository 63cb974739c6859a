from kvplan.cli.launch import main

main()
