"""A throwaway Spark standalone cluster on 127.0.0.1, from the installed pyspark's own launcher.

One master, one worker, and on demand a Spark Connect server on them: what tests and benchmarks
point KAFKA_LAB_SPARK_MASTER / SPARK_REMOTE at, and a way to try the cluster path without a cluster.
Every process is a lab.runtime.processes child (logs in `folder`, dies with this process).

    with StandaloneSpark(folder, cores=1, memory="1g") as cluster:
        os.environ["KAFKA_LAB_SPARK_MASTER"] = cluster.master_url
        remote = cluster.start_connect_server()      # sc://127.0.0.1:<port>
"""
from __future__ import annotations

from pathlib import Path

from ..runtime.ports import free_port, listening
from ..runtime.jvm import spark_java_home
from ..runtime.processes import Child, require_java, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_SECONDS = 90


def spark_home() -> Path:
    """The pip-installed pyspark is a Spark distribution: bin/spark-class, bin/spark-submit, jars/."""
    import pyspark
    return Path(pyspark.__file__).parent


class StandaloneSpark:
    """A master and one worker with `cores` cores and `memory` for executors, all on loopback."""

    def __init__(self, folder: Path, cores: int = 1, memory: str = "1g", daemon_memory: str = "256m"):
        self.folder, self.cores, self.memory = Path(folder), cores, memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.work_dir = self.folder / "worker"
        conf = self.folder / "conf"   # an empty conf dir: no spark-defaults.conf of the machine leaks in
        conf.mkdir(parents=True, exist_ok=True)
        self.env = {"SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1",
                    "JAVA_HOME": str(spark_java_home()),   # the lab's Java, or the shim Spark needs in front of it
                    "SPARK_DAEMON_MEMORY": daemon_memory, "SPARK_NO_DAEMONIZE": "1"}
        self.master = self.worker = self.connect = None

    def start(self) -> StandaloneSpark:
        require_java(17)
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.master = Child("spark-master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1",
                                             "--port", str(self.port), "--webui-port", str(free_port())],
                            self.folder / "master.log", env=self.env, cwd=self.folder)
        wait_until(lambda: listening(self.port), START_SECONDS, "the Spark master to listen", child=self.master)
        self.worker = Child("spark-worker", [spark_class, WORKER_CLASS, "--host", "127.0.0.1",
                                             "--cores", str(self.cores), "--memory", self.memory,
                                             "--webui-port", str(free_port()), "--work-dir", str(self.work_dir),
                                             self.master_url],
                            self.folder / "worker.log", env=self.env, cwd=self.folder)
        wait_until(lambda: self.worker.grep("Successfully registered with master"), START_SECONDS,
                   "the Spark worker to register with the master", child=self.worker)
        return self

    def start_connect_server(self, driver_memory: str = "512m", jars: list | None = None) -> str:
        """A Spark Connect server whose executors run on this cluster (in place of one started before); returns
        its sc:// URL. With no `jars` it has no Kafka connector of its own: a client brings it as session
        artifacts (lab.audit.spark), once per server; with the connector's jars, every session uses them."""
        if self.connect is not None:
            self.connect.stop(timeout=15)
        port = free_port()
        self.connect = Child("spark-connect", [
            str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--master", self.master_url,
            *(["--jars", ",".join(map(str, jars))] if jars else []),
            "--driver-memory", driver_memory, "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            # 200 (the default) tiny tasks per shuffle is most of a small audit's time on one core
            "--conf", f"spark.sql.shuffle.partitions={2 * self.cores}"],
            # the launcher sizes this class as a daemon: SPARK_DAEMON_MEMORY, not --driver-memory, is its heap
            self.folder / f"connect-{port}.log", env={**self.env, "SPARK_DAEMON_MEMORY": driver_memory},
            cwd=self.folder)
        wait_until(lambda: self.connect.grep("Spark Connect server started at"), START_SECONDS,
                   "the Spark Connect server to start", child=self.connect)
        return f"sc://127.0.0.1:{port}"

    def app_folders(self) -> list[Path]:
        """One folder per application that ran executors on the worker (app-<time>-<n>)."""
        return sorted(self.work_dir.glob("app-*")) if self.work_dir.exists() else []

    def pids(self) -> list[int]:
        """Master, worker, their executors and the Connect server: for CPU accounting."""
        import psutil
        found = []
        for child in (self.master, self.worker, self.connect):
            if child is not None and child.alive():
                proc = psutil.Process(child.pid)
                found += [proc.pid, *(p.pid for p in proc.children(recursive=True))]
        return found

    def stop(self) -> None:
        """Connect server first (it is the worker's client), then worker (its executors go with it), then master."""
        for child in (self.connect, self.worker, self.master):
            if child is not None:
                child.stop(timeout=15)

    def __enter__(self) -> StandaloneSpark:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

