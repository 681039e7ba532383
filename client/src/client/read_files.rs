//! Whole small files in few round trips: the namespace answers for many paths in one batched
//! stat (up to `BATCH_STAT_MAX` a request), then every file's bytes are read at once, all
//! reads in flight together (the analogue of dataflux's composed downloads, for datasets of
//! many small samples). A read needs no open: a reader holds no session, and the stat's inode
//! carries the layout.
//!
//! Invariant: each path's answer is its own; one missing file fails only its own entry. A file
//! is read to the length its stat answered (a writer still appending is read as of then).
//! Not here: ranges within a file (`Client::read_many`), writes.

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::meta::{InodeKind, MetaError, BATCH_STAT_MAX};
use t3fs_core::wire::NO_DATA;

use super::{Client, ClientError, File};

impl Client {
    /// The whole contents of each of `paths` (final symlinks followed), in order; a path that
    /// is not a readable file gets its own error. Paths go `BATCH_STAT_MAX` at a time: one
    /// stat request, then their reads together, which keeps a batch well inside the client's
    /// concurrent-call bound (`CLIENT_CALLS_MAX`).
    pub async fn read_files(
        &self,
        paths: Vec<String>,
    ) -> Result<Vec<Result<Vec<u8>, ClientError>>, ClientError> {
        let mut out = Vec::with_capacity(paths.len());
        for group in paths.chunks(BATCH_STAT_MAX) {
            out.extend(self.read_group(group.to_vec()).await?);
        }
        Ok(out)
    }

    async fn read_group(
        &self,
        paths: Vec<String>,
    ) -> Result<Vec<Result<Vec<u8>, ClientError>>, ClientError> {
        let files: Vec<Result<File, ClientError>> = self
            .batch_stat(paths)
            .await?
            .into_iter()
            .map(|stat| {
                let i = stat.map_err(ClientError::Meta)?;
                match &i.kind {
                    InodeKind::File { .. } => self.file_of(i, 0),
                    InodeKind::Directory { .. } => Err(ClientError::Meta(MetaError::IsDir)),
                    InodeKind::Symlink { .. } => Err(ClientError::Meta(MetaError::Loop)),
                    InodeKind::Special { .. } => {
                        Err(ClientError::Meta(MetaError::Invalid(NO_DATA)))
                    }
                }
            })
            .collect();
        let calls: Vec<ClientCall> = files
            .iter()
            .filter_map(|f| f.as_ref().ok().filter(|f| f.length > 0).map(read_whole))
            .collect();
        let mut answers = self.batch(calls).await.into_iter();
        Ok(files
            .into_iter()
            .map(|f| {
                let f = f?;
                if f.length == 0 {
                    return Ok(Vec::new());
                }
                match answers.next() {
                    Some(Ok(ClientRet::Read { data, .. })) => Ok(data.into_vec()),
                    Some(Ok(other)) => Err(ClientError::answered(other)),
                    Some(Err(e)) => Err(e),
                    None => Err(ClientError::Failed("a batched read went unanswered".into())),
                }
            })
            .collect())
    }
}

fn read_whole(f: &File) -> ClientCall {
    ClientCall::Read {
        inode: f.inode,
        layout: f.layout.clone(),
        offset: 0,
        len: f.length,
    }
}
