//! Open directories: `opendir` takes the directory's whole listing (paged from meta) and keeps
//! it by handle, `readdir` serves it by offset, `releasedir` drops it, so a listing is the
//! directory as it was at `opendir` whatever changes after (as a local file system's readdir
//! may, POSIX leaves it open whether later changes show).
//!
//! Offsets (readdir's and readdirplus's): 1 is ".", 2 is "..", 3 + k the k-th entry; each entry
//! carries the offset of the one after it, which is where the kernel's next call starts.
//! Invariants: a listing is taken only of the directory the kernel named (meta finds inode
//! `ino` at its path, else ESTALE); a handle's listing never changes. Not here: readdirplus's
//! attributes (dir_plus.rs), the reply (fs.rs).

use std::sync::Arc;

use fuser::{Errno, FileType, INodeNo};

use super::attr::kind_of;
use super::inner::{lock, stale, Inner, Listing};
use super::mount_client::MountClient;
use super::names::ino_of;
use crate::client::ClientError;

/// Names per page of a directory listing asked of meta.
const LIST_PAGE: u32 = 512;

/// One entry a readdir reply gives: its inode, the offset of the entry after it, its kind and
/// name.
pub(super) type DirEntryOut<'a> = (INodeNo, u64, FileType, &'a str);

impl<C: MountClient> Inner<C> {
    /// opendir of directory `ino`: its listing kept, the handle answered.
    pub async fn opendir(&self, ino: INodeNo) -> Result<u64, Errno> {
        let l = self.open_dir(ino).await?;
        let fh = self.fh();
        lock(&self.dirs).insert(fh, Arc::new(l));
        Ok(fh)
    }

    /// The listing handle `fh` holds, if it is open.
    pub fn dir_listing(&self, fh: u64) -> Option<Arc<Listing>> {
        lock(&self.dirs).get(&fh).cloned()
    }

    /// releasedir: the handle's listing goes (an unknown handle is no error).
    pub fn releasedir(&self, fh: u64) {
        lock(&self.dirs).remove(&fh);
    }

    /// opendir's listing of directory `ino`, which meta must find at its path.
    async fn open_dir(&self, ino: INodeNo) -> Result<Listing, Errno> {
        self.listing(&self.path(ino)?).await.map_err(|e| stale(&e))
    }

    /// The whole listing of `path`, page by page.
    async fn listing(&self, path: &str) -> Result<Listing, ClientError> {
        let mut out = Vec::new();
        let mut after = Vec::new();
        loop {
            let page = self
                .client
                .list_after(path, after.clone(), LIST_PAGE)
                .await?;
            let full = page.len() == LIST_PAGE as usize;
            for (name, e) in page {
                after.clone_from(&name);
                let name = String::from_utf8_lossy(&name).into_owned();
                out.push((name, ino_of(e.inode), kind_of(e.kind)));
            }
            if !full {
                return Ok(out);
            }
        }
    }
}

/// The entries of directory `ino`'s `listing` from `offset` on, the dots first (both with the
/// directory's own number, as the mount has always answered them).
pub(super) fn dir_entries(
    ino: INodeNo,
    listing: &Listing,
    offset: u64,
) -> impl Iterator<Item = DirEntryOut<'_>> {
    let dots = [(".", ino), ("..", ino)].map(|(n, i)| (n, i, FileType::Directory));
    let named = listing.iter().map(|(n, i, k)| (n.as_str(), *i, *k));
    dots.into_iter()
        .chain(named)
        .enumerate()
        .skip(offset as usize)
        .map(|(k, (name, i, kind))| (i, k as u64 + 1, kind, name))
}
