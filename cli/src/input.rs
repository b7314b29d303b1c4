//! Reading the input of a subcommand: a file or stdin, as chunks as they arrive.

use std::fs::File;
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::path::Path;

use anyhow::Context;
use bytes::{Bytes, BytesMut};

/// Bytes read at most per read call when no chunk size is given.
const READ_SIZE: usize = 64 * 1024;

/// A source of input bytes: the named file, or stdin when the path is absent or `-`; with the
/// name its read errors are reported under (`stdin` or the path).
pub fn open(path: Option<&Path>) -> anyhow::Result<(Box<dyn Read>, String)> {
    match path {
        Some(p) if p.as_os_str() != "-" => {
            let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            Ok((Box::new(file), p.display().to_string()))
        }
        _ => Ok((stdin().context("cannot read stdin")?, "stdin".to_owned())),
    }
}

/// Stdin as a reader whose read errors are errors. `io::stdin()` takes a read failing with
/// EBADF (stdin opened for writing only) for the end of the input, so an unreadable stdin
/// would look empty; a duplicate of the descriptor reports the failure.
#[cfg(unix)]
pub fn stdin() -> io::Result<Box<dyn Read>> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned()?;
    Ok(Box::new(File::from(fd)))
}

/// Stdin as a reader.
#[cfg(not(unix))]
pub fn stdin() -> io::Result<Box<dyn Read>> {
    Ok(Box::new(io::stdin()))
}

/// Calls `on_chunk` with the input split into chunks of exactly `chunk` bytes (the last may be
/// shorter), or, without a chunk size, with whatever each read returns, so that bytes from a pipe
/// are handled as soon as they arrive. The buffer grows with what has been read, never to a
/// chunk size the input does not fill (`--chunk` may be anything up to `u64::MAX`). Stops
/// reading when `on_chunk` breaks (a stream that failed: nothing after it is read, so a pipe
/// kept open by its writer does not keep the error waiting).
pub fn for_each_chunk(
    mut reader: impl Read,
    name: &str,
    chunk: Option<usize>,
    mut on_chunk: impl FnMut(Bytes) -> anyhow::Result<ControlFlow<()>>,
) -> anyhow::Result<()> {
    let chunk = chunk.map(|n| n.max(1));
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    loop {
        let start = buf.len();
        // At most one read's worth at a time, and never past the end of the chunk.
        let want = match chunk {
            Some(n) => (n - start).min(READ_SIZE),
            None => READ_SIZE,
        };
        if buf.capacity() - start < want {
            buf.reserve(want.max(READ_SIZE));
        }
        buf.resize(start + want, 0);
        let read = match reader.read(&mut buf[start..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(start);
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
        };
        buf.truncate(start + read);
        let eof = read == 0;
        let ready = match chunk {
            Some(n) => buf.len() == n || (eof && !buf.is_empty()),
            None => !buf.is_empty(),
        };
        if ready && on_chunk(buf.split().freeze())?.is_break() {
            return Ok(());
        }
        if eof {
            return Ok(());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A reader that returns at most `step` bytes per read, as a pipe does.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn chunks(data: &[u8], step: usize, chunk: Option<usize>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for_each_chunk(Trickle { data, step }, "input", chunk, |bytes| {
            out.push(bytes.to_vec());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        out
    }

    #[test]
    fn chunks_are_exactly_n_bytes_whatever_the_reads() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for step in [1, 7, 4096, 100_000] {
            for n in [1, 3, 1000, 65_536, 70_000, 1 << 20] {
                let got = chunks(&data, step, Some(n));
                assert_eq!(got.concat(), data, "step {step}, chunk {n}");
                let (last, full) = got.split_last().unwrap();
                assert!(full.iter().all(|c| c.len() == n), "step {step}, chunk {n}");
                assert!(
                    !last.is_empty() && last.len() <= n,
                    "step {step}, chunk {n}"
                );
            }
            let got = chunks(&data, step, None);
            assert_eq!(got.concat(), data, "step {step}");
        }
    }

    /// A chunk size far above the input's size allocates no more than the input needs.
    #[test]
    fn a_chunk_size_larger_than_the_input_is_not_allocated() {
        assert_eq!(chunks(b"abc", 2, Some(usize::MAX)), [b"abc".to_vec()]);
        assert_eq!(chunks(b"", 2, Some(usize::MAX)), Vec::<Vec<u8>>::new());
    }
}
