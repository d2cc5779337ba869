//! Flash kept in a file on the host, through semihosting (feature
//! `flash`): 4 pages of 1 KiB with NOR semantics (a write only clears bits,
//! an erase sets a page to 0xFF), in `flash.bin` in QEMU's working folder.
//! It outlives the emulator, so a firmware killed or stopped finds what it
//! saved at its next boot: the board's flash across a power cut.

use embedded_storage_async::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

/// The flash's erase page.
pub const PAGE: usize = 1024;
/// Its pages.
pub const PAGES: usize = 4;
/// Its write word.
pub const WORD: usize = 4;

/// A semihosting call. The emulator (the debug host) performs it on the
/// host; `args` are the call's parameter block, which lives for the call.
#[allow(unsafe_code)]
fn host_call(nr: usize, args: &[usize]) -> usize {
    // SAFETY: semihosting passes the address of `args` to the host, which
    // reads the block (and any buffer it points to, owned by the caller
    // for the duration of the call) and returns before this does.
    unsafe { cortex_m_semihosting::syscall1(nr, args.as_ptr() as usize) }
}

/// Flash kept in a host file, with NOR semantics.
#[derive(Debug)]
pub struct HostFlash {
    handle: usize,
}

/// A semihosting file operation failed, or an address is past the flash.
#[derive(Debug)]
pub enum HostError {
    /// The host did not do it.
    Io,
    /// Past the flash's end.
    OutOfBounds,
}

impl NorFlashError for HostError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            HostError::Io => NorFlashErrorKind::Other,
            HostError::OutOfBounds => NorFlashErrorKind::OutOfBounds,
        }
    }
}

impl HostFlash {
    /// Opens `flash.bin` for reading and writing, made erased if it is not
    /// there.
    pub fn open() -> Option<Self> {
        const NAME: &[u8] = b"flash.bin\0";
        use cortex_m_semihosting::nr;
        let open = |mode| host_call(nr::OPEN, &[NAME.as_ptr() as usize, mode, NAME.len() - 1]);
        let handle = open(nr::open::RW_BINARY);
        if handle != usize::MAX {
            return Some(HostFlash { handle });
        }
        // No flash yet: a new, erased part.
        let handle = open(nr::open::RW_TRUNC_BINARY);
        if handle == usize::MAX {
            return None;
        }
        let flash = HostFlash { handle };
        let ones = [0xFF; PAGE];
        for page in 0..PAGES {
            flash.write_at((page * PAGE) as u32, &ones).ok()?;
        }
        Some(flash)
    }

    fn check(offset: u32, len: usize) -> Result<(), HostError> {
        if offset as usize + len > PAGE * PAGES {
            return Err(HostError::OutOfBounds);
        }
        Ok(())
    }

    fn seek(&self, offset: u32) -> Result<(), HostError> {
        use cortex_m_semihosting::nr;
        match host_call(nr::SEEK, &[self.handle, offset as usize]) {
            0 => Ok(()),
            _ => Err(HostError::Io),
        }
    }

    fn read_at(&self, offset: u32, bytes: &mut [u8]) -> Result<(), HostError> {
        use cortex_m_semihosting::nr;
        self.seek(offset)?;
        let left = host_call(
            nr::READ,
            &[self.handle, bytes.as_mut_ptr() as usize, bytes.len()],
        );
        if left == 0 {
            Ok(())
        } else {
            Err(HostError::Io)
        }
    }

    fn write_at(&self, offset: u32, bytes: &[u8]) -> Result<(), HostError> {
        use cortex_m_semihosting::nr;
        self.seek(offset)?;
        let left = host_call(
            nr::WRITE,
            &[self.handle, bytes.as_ptr() as usize, bytes.len()],
        );
        if left == 0 {
            Ok(())
        } else {
            Err(HostError::Io)
        }
    }
}

impl ErrorType for HostFlash {
    type Error = HostError;
}

impl ReadNorFlash for HostFlash {
    const READ_SIZE: usize = 1;

    async fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), HostError> {
        Self::check(offset, bytes.len())?;
        self.read_at(offset, bytes)
    }

    fn capacity(&self) -> usize {
        PAGE * PAGES
    }
}

impl NorFlash for HostFlash {
    const WRITE_SIZE: usize = WORD;
    const ERASE_SIZE: usize = PAGE;

    async fn erase(&mut self, from: u32, to: u32) -> Result<(), HostError> {
        Self::check(from, (to - from) as usize)?;
        let ones = [0xFF; 256];
        let mut at = from;
        while at < to {
            let n = ((to - at) as usize).min(ones.len());
            self.write_at(at, &ones[..n])?;
            at += n as u32;
        }
        Ok(())
    }

    async fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), HostError> {
        Self::check(offset, bytes.len())?;
        // NOR: a write clears bits and never sets one.
        let mut word = [0u8; WORD];
        for (i, chunk) in bytes.chunks(WORD).enumerate() {
            let at = offset + (i * WORD) as u32;
            let old = &mut word[..chunk.len()];
            self.read_at(at, old)?;
            for (o, n) in old.iter_mut().zip(chunk) {
                *o &= n;
            }
            self.write_at(at, old)?;
        }
        Ok(())
    }
}
