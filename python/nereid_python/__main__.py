from .stub import main

main()
