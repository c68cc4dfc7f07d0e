"""The `highwater` command-line tools, apart from the client library in client/.

`main` (client/cli/main.py) is the entry point; each command group has its module here, along
with the local-cluster launcher (`local_cluster`, `zookeeper_server`) and what only the tools
use (`perf_tools`, `reassign_plan`, `dump_log`). See docs/operations.md ("The `highwater` CLI").
"""
