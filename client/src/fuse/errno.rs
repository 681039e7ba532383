//! The errno each client failure answers a FUSE request with: one table, the kernel's
//! conventions (a meta status maps to the errno a local file system would give; failures of the
//! cluster itself are EIO, never a status that would make a tool believe a name is absent).

use fuser::Errno;
use t3fs_core::meta::MetaError;

use crate::client::ClientError;

/// The errno for `e`.
pub fn errno(e: &ClientError) -> Errno {
    match e {
        ClientError::Meta(m) => meta_errno(m),
        ClientError::Invalid(_) => Errno::EINVAL,
        // Past the layout's largest file, as a local file system answers past its maximum.
        ClientError::TooLarge { .. } => Errno::EFBIG,
        // A storage target had no room for the write: as a full local file system answers.
        ClientError::NoSpace => Errno::ENOSPC,
        ClientError::Connect(_) | ClientError::Stopped | ClientError::Failed(_) => Errno::EIO,
    }
}

/// The errno for a meta status.
pub fn meta_errno(m: &MetaError) -> Errno {
    match m {
        MetaError::NotFound => Errno::ENOENT,
        MetaError::Exists => Errno::EEXIST,
        MetaError::NotDir => Errno::ENOTDIR,
        MetaError::IsDir => Errno::EISDIR,
        MetaError::NotEmpty => Errno::ENOTEMPTY,
        MetaError::Invalid(_) => Errno::EINVAL,
        MetaError::Loop => Errno::ELOOP,
        MetaError::NameTooLong => Errno::ENAMETOOLONG,
        MetaError::TooManyLinks => Errno::EMLINK,
        MetaError::NotPermitted => Errno::EPERM,
        MetaError::Access => Errno::EACCES,
        // Another client holds the directory lock (3FS kNoLock): busy, try later.
        MetaError::NoLock => Errno::EBUSY,
        // The KV had no room for the change (a full disk under the embedded engine, etcd's
        // space quota): nothing was written, as a full local file system answers.
        MetaError::Kv(t3fs_core::kv::KvError::NoSpace) => Errno::ENOSPC,
        // The KV failed or a row is damaged, and the meta service's internal statuses (never
        // answered): the file system failed, not the request.
        _ => Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_meta_status_has_the_errno_a_local_file_system_gives() {
        let table = [
            (MetaError::NotFound, libc::ENOENT),
            (MetaError::Exists, libc::EEXIST),
            (MetaError::NotDir, libc::ENOTDIR),
            (MetaError::IsDir, libc::EISDIR),
            (MetaError::NotEmpty, libc::ENOTEMPTY),
            (MetaError::Invalid("x"), libc::EINVAL),
            (MetaError::Loop, libc::ELOOP),
            (MetaError::NameTooLong, libc::ENAMETOOLONG),
            (MetaError::TooManyLinks, libc::EMLINK),
            (MetaError::NotPermitted, libc::EPERM),
            (MetaError::Access, libc::EACCES),
            (MetaError::NoLock, libc::EBUSY),
            (MetaError::Corrupt, libc::EIO),
            (
                MetaError::Kv(t3fs_core::kv::KvError::Unavailable),
                libc::EIO,
            ),
            (MetaError::Kv(t3fs_core::kv::KvError::NoSpace), libc::ENOSPC),
        ];
        for (m, want) in table {
            assert_eq!(meta_errno(&m).code(), want, "{m:?}");
        }
        assert_eq!(errno(&ClientError::Stopped).code(), libc::EIO);
        assert_eq!(
            errno(&ClientError::Invalid("x".into())).code(),
            libc::EINVAL
        );
        let too_large = ClientError::TooLarge {
            size: (1 << 52) + 5,
            max: (1 << 52) - (1 << 20),
        };
        assert_eq!(errno(&too_large).code(), libc::EFBIG);
        // A write refused for want of space is ENOSPC, never EIO; other failures stay EIO.
        assert_eq!(errno(&ClientError::NoSpace).code(), libc::ENOSPC);
        assert_eq!(errno(&ClientError::Failed("x".into())).code(), libc::EIO);
        let refused = t3fs_core::client::ClientRet::Failed {
            chunk: t3fs_core::ids::ChunkId::new(1, 0),
            status: t3fs_core::msg::Status::NoSpace,
        };
        assert_eq!(ClientError::answered(refused), ClientError::NoSpace);
        let failed = t3fs_core::client::ClientRet::Failed {
            chunk: t3fs_core::ids::ChunkId::new(1, 0),
            status: t3fs_core::msg::Status::ForwardFailed,
        };
        assert_eq!(errno(&ClientError::answered(failed)).code(), libc::EIO);
    }
}
