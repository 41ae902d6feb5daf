"""A Python tool reading a job whose ranks all run on other nodes, as ``mpir`` does: run
inside node1 of the simulated cluster by ``tests/pytest.rs`` (not a pytest module).

Usage: ``python multinode_tool.py STARTER_PID MPIR_PROGRAM LAUNCH_TEMPLATE``; prints the
queues document, then the stacks document, one JSON line each."""

import json
import sys

import mpir


def main() -> int:
    starter, program, template = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with mpir.Session.attach(
        starter, agent_program=program, agent_launch=template, agent_timeout=60.0
    ) as session:
        print(json.dumps(session.queues()))
        print(json.dumps(session.stacks()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
