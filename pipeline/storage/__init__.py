"""Storage: where every stage's tables live and how they change safely.

`store` reads and writes the output folder (versions, sharded tables, publishing a
finished version); `files` makes every write atomic; `lock` keeps one writer per output;
`remote` mirrors the folder to object storage (pull, push), over `mirror` (which local
folder stands for an `s3://` URL) and `object_store` (the S3 filesystem calls); `validate`
checks a published index against the schemas before readers see it."""
