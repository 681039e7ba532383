"""pandas and pyarrow on t3fs URLs, in a fresh interpreter that never imports t3fs: fsspec
finds the file system through its entry point, as a user's code would."""

import os
import subprocess
import sys

SCRIPT = """
import sys, fsspec, pandas as pd, pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
root = sys.argv[1]
df = pd.DataFrame({"step": range(1000), "loss": [1.0 / (i + 1) for i in range(1000)],
                   "tag": ["train" if i % 3 else "eval" for i in range(1000)]})
df.to_parquet(f"t3fs://{root}/frame.parquet")
back = pd.read_parquet(f"t3fs://{root}/frame.parquet")
assert back.equals(df), "read_parquet gave other rows"
df.to_csv(f"t3fs://{root}/frame.csv", index=False)
assert pd.read_csv(f"t3fs://{root}/frame.csv").equals(df), "read_csv gave other rows"
# A partitioned pyarrow dataset: written and scanned through the fsspec file system.
fs = fsspec.filesystem("t3fs")
table = pa.Table.from_pandas(df)
ds.write_dataset(table, f"{root}/parts", format="parquet", filesystem=fs,
                 partitioning=["tag"], partitioning_flavor="hive")
scanned = ds.dataset(f"{root}/parts", format="parquet", filesystem=fs, partitioning="hive")
assert scanned.count_rows() == 1000
got = scanned.to_table(filter=ds.field("tag") == "eval").to_pandas()
assert sorted(got["step"]) == [i for i in range(1000) if i % 3 == 0]
# Row groups read by range: pyarrow asks only for the footer and the columns it needs.
with fs.open(f"{root}/frame.parquet", "rb") as f:
    assert pq.ParquetFile(f).read(columns=["loss"]).num_rows == 1000
print("ok", fs.__class__.__module__)
"""


def test_pandas_and_pyarrow_read_and_write_t3fs_urls(cluster, t3fs_fs, scratch):
    env = dict(os.environ, T3FS_CLUSTER=cluster)
    out = subprocess.run([sys.executable, "-c", SCRIPT, scratch], env=env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert out.stdout.decode().startswith("ok t3fs.fs")
    assert t3fs_fs.isdir(f"{scratch}/parts/tag=eval")
