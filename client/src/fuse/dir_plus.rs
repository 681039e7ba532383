//! readdirplus: a directory page with each entry's attributes, so that `ls -l` and `find`
//! over a directory cost one meta call per [`BATCH_STAT_MAX`] entries instead of a lookup each.
//! The entries come from the listing `opendir` took; their attributes from one batch stat at
//! reply time (the kernel takes each returned entry as a lookup, so the caller counts one for
//! each entry it puts in the reply, the dots excepted: the kernel links no dentry for them and
//! reads only their inode number and kind).
//!
//! Invariants: an entry is returned with the attributes of the inode the listing named, found
//! at its name: a batch stat follows final symlinks, so symlinks, and any entry whose answer
//! names another inode, are looked up alone without following, and an entry whose name no
//! longer names that inode (removed, renamed or replaced since the listing, or its directory
//! moved by another client) is left out, as a readdir racing a removal may; an entry of a
//! directory the caller may read but not search goes with its number and kind only. Not here: the
//! listing (dir_handles.rs), plain readdir and the counting (fs.rs).

use std::ffi::OsStr;

use fuser::{Errno, FileAttr, FileType, INodeNo};
use t3fs_core::meta::BATCH_STAT_MAX;

use super::attr::{blind_attr, dot_attr};
use super::inner::{Inner, Listing};
use super::mount_client::MountClient;
use super::names::{ino_of, join};

/// One entry of a readdirplus page: its offset (of the entry after it), name, attributes, and
/// whether those were read (false: the caller may list the directory but not search it, so
/// only the listing's inode number and kind are known, to be given with no lifetime).
pub(super) type PlusEntry = (u64, String, FileAttr, bool);

impl<C: MountClient> Inner<C> {
    /// The entries of directory `ino` (path `dir`) from `offset` on, at most
    /// [`BATCH_STAT_MAX`], with their attributes. Offsets as readdir's: 1 is ".", 2 "..",
    /// 3 + k the k-th entry.
    pub async fn plus_page(
        &self,
        ino: INodeNo,
        dir: &str,
        listing: &Listing,
        offset: u64,
    ) -> Result<Vec<PlusEntry>, Errno> {
        let mut out = Vec::new();
        // The kernel makes no dentries of the dots and reads only their number and kind.
        for (k, name) in [".", ".."].into_iter().enumerate().skip(offset as usize) {
            out.push((k as u64 + 1, name.to_string(), dot_attr(ino), true));
        }
        let skip = (offset as usize).saturating_sub(2);
        let page: Vec<_> = listing
            .iter()
            .enumerate()
            .skip(skip)
            .take(BATCH_STAT_MAX)
            .map(|(k, e)| (k as u64 + 3, e))
            .collect();
        let mut paths = Vec::with_capacity(page.len());
        for (_, (name, ..)) in &page {
            paths.push(join(dir, OsStr::new(name))?);
        }
        let batched: Vec<_> = paths
            .iter()
            .zip(&page)
            .filter(|(_, (_, e))| e.2 != FileType::Symlink)
            .map(|(p, _)| p.clone())
            .collect();
        let mut stats = if batched.is_empty() {
            Vec::new()
        } else {
            self.client
                .batch_stat(batched)
                .await
                .map_err(|e| super::errno::errno(&e))?
        }
        .into_iter();
        for (path, (off, (name, want, kind))) in paths.into_iter().zip(page) {
            let got = if *kind == FileType::Symlink {
                None
            } else {
                stats.next().and_then(Result::ok)
            };
            let found = match got.filter(|i| ino_of(i.id) == *want) {
                Some(i) => i,
                None => match self.client.lstat(&path).await {
                    Ok(i) if ino_of(i.id) == *want => i,
                    Ok(_) => continue,
                    Err(e) if super::inner::stale(&e).code() == libc::ESTALE => continue,
                    // Readable but not searchable: Linux lists the names and refuses each
                    // stat, so the entry goes with what the listing knows, and its stat, asked
                    // again at once, answers EACCES.
                    Err(e) if super::errno::errno(&e).code() == libc::EACCES => {
                        out.push((off, name.clone(), blind_attr(*want, *kind), false));
                        continue;
                    }
                    Err(e) => return Err(super::errno::errno(&e)),
                },
            };
            out.push((off, name.clone(), self.attr(&found), true));
        }
        Ok(out)
    }
}
