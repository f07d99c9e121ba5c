from jeeves_mcp.cli import main

main()
