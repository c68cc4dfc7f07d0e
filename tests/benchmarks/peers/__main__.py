from tests.benchmarks.peers.run import main

main()
