# The grader in a Linux container, for macOS and Windows (Docker Desktop, Podman) or any
# machine where you would rather not install anything. See book/instructor_guide.md,
# "Grading on macOS, Windows or in a container".
#
#   docker build -f docker/grader.Dockerfile -t attnlab-grader .
#   docker run --rm --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --cap-add SYS_ADMIN --network none \
#       -v "$PWD/submissions:/course/submissions:ro" -v "$PWD/student:/course/source:ro" \
#       -v "$PWD/out:/course/out" attnlab-grader \
#       /course/submissions --source /course/source --out /course/out/grades.csv \
#       --gradebook /course/out/gradebook.csv --feedback /course/out/feedback
#
# With those options bubblewrap can make its namespaces and the grader runs rootful (each
# notebook in its own sandbox, with a user id of its own). Without them (a locked-down
# runtime) it refuses; add --allow-unsandboxed to grade in uid-only mode (a user id per
# notebook, no namespaces: the container is then the only wall around the class).
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/attnlab
COPY pyproject.toml README.md ./
COPY src ./src
# The grader's own needs beside attnlab (nbclient runs the notebooks); torch for chapters
# whose exercises use it (05.2). The lead's packaging may name these as an extra.
RUN pip install --no-cache-dir ".[torch]" nbclient ipykernel nbformat tqdm

ENV MPLBACKEND=Agg OMP_NUM_THREADS=1
ENTRYPOINT ["python", "-m", "attnlab.grade"]
