//! Reading zstd streams of any number of frames (skippable frames skipped), as layers written by
//! `zstd -T0` or in the `zstd:chunked` format are, with the pure-Rust `ruzstd` decoder.

use std::io::{self, BufRead, Read};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

/// Decompresses a zstd stream of one or more frames.
pub(crate) struct ZstdReader<R: BufRead> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> ZstdReader<R> {
    /// A reader of the decompressed content of `source`.
    pub(crate) fn new(source: R) -> Self {
        ZstdReader {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
        }
    }
}

impl<R: BufRead> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                if self.decoder.can_collect() > 0 {
                    return self.decoder.read(buf);
                }
                if self.decoder.is_finished() {
                    self.in_frame = false;
                    continue;
                }
                self.decoder
                    .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(io::Error::other)?;
                continue;
            }
            if self.source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            match self.decoder.reset(&mut self.source) {
                Ok(()) => self.in_frame = true,
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = io::copy(
                        &mut (&mut self.source).take(u64::from(length)),
                        &mut io::sink(),
                    )?;
                    if skipped < u64::from(length) {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the zstd stream ends inside a skippable frame",
                        ));
                    }
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{compress_to_vec, CompressionLevel};

    #[test]
    fn reads_several_frames_and_skips_skippable_ones() {
        let mut stream = compress_to_vec(&b"hello "[..], CompressionLevel::Fastest);
        // A skippable frame: magic 0x184D2A50, length 3, three bytes.
        stream.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        stream.extend(compress_to_vec(&b"world"[..], CompressionLevel::Fastest));
        let mut out = String::new();
        ZstdReader::new(&stream[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "hello world");
    }

    #[test]
    fn garbage_is_an_error() {
        let mut out = Vec::new();
        assert!(ZstdReader::new(&b"not zstd at all"[..])
            .read_to_end(&mut out)
            .is_err());
    }
}
