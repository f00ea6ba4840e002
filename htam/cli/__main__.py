from htam.cli import main

main()
