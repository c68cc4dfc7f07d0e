from tests.benchmarks.curves.run import main

main()
