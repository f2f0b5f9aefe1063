//! The codec against postcard 1.x (whose format it writes) and against
//! bad input.

use super::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;

fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    encode_with(value, Vec::new()).expect("encodes").0
}

/// `value` encodes to postcard's bytes and decodes back from them.
fn same_as_postcard<T>(value: &T)
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq + Debug,
{
    let ours = encode(value);
    let theirs = postcard::to_allocvec(value).expect("postcard encodes");
    assert_eq!(ours, theirs, "the bytes of {value:?}");
    let back: T = from_bytes(&theirs).expect("decodes postcard's bytes");
    assert_eq!(&back, value);
    let back: T = postcard::from_bytes(&ours).expect("postcard decodes ours");
    assert_eq!(&back, value);
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
enum Shape {
    Empty,
    Dot(f32),
    Line(i64, i64),
    Named { name: String, sides: u16 },
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Unit;

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Everything {
    flag: bool,
    small: (u8, i8, u16, i16),
    wide: (u32, i32, u64, i64, u128, i128, usize, isize),
    float: (f32, f64),
    letter: char,
    text: String,
    #[serde(with = "serde_bytes")]
    raw: Vec<u8>,
    maybe: Option<Box<Everything>>,
    nothing: (),
    unit: Unit,
    shapes: Vec<Shape>,
    map: BTreeMap<String, Vec<u32>>,
    plain: (Vec<u8>, Vec<i8>, Vec<f32>, Vec<f64>),
    boxed: Box<[f64]>,
    array: [u16; 3],
}

fn everything(depth: u32) -> Everything {
    Everything {
        flag: depth % 2 == 0,
        small: (255, -128, 300, -300),
        wide: (
            u32::MAX,
            i32::MIN,
            u64::MAX,
            i64::MIN,
            u128::MAX,
            i128::MIN,
            usize::MAX,
            isize::MIN,
        ),
        float: (f32::MIN_POSITIVE, -0.0),
        letter: '\u{1F980}',
        text: "talking tasks".into(),
        raw: vec![0, 1, 255],
        maybe: (depth > 0).then(|| Box::new(everything(depth - 1))),
        nothing: (),
        unit: Unit,
        shapes: vec![
            Shape::Empty,
            Shape::Dot(1.5),
            Shape::Line(-1, 1 << 40),
            Shape::Named {
                name: "square".into(),
                sides: 4,
            },
        ],
        map: [
            ("a".to_string(), vec![1, 128, 1 << 20]),
            ("b".into(), vec![]),
        ]
        .into(),
        plain: (
            (250..=255).collect(),
            vec![-1, 0, 1],
            vec![f32::INFINITY, -2.5],
            (0..100).map(|i| i as f64 * 0.5).collect(),
        ),
        boxed: vec![1.0, 2.0].into_boxed_slice(),
        array: [1, 200, 40000],
    }
}

#[test]
fn every_kind_of_value_is_postcards_bytes() {
    same_as_postcard(&everything(2));
    for n in [0u64, 1, 127, 128, 16383, 16384, u32::MAX.into(), u64::MAX] {
        same_as_postcard(&n);
        same_as_postcard(&(n as i64));
        same_as_postcard(&-(n as i64));
    }
    same_as_postcard(&(i16::MIN, i16::MAX, u16::MAX, i32::MAX));
    same_as_postcard(&Vec::<f64>::new());
    same_as_postcard(&vec![vec![1.0f64], vec![], vec![2.0, 3.0]]);
}

#[test]
fn a_plain_sequence_is_its_bytes_and_comes_back_whole() {
    for len in [0usize, 1, 7, 4096, 1 << 17] {
        let v: Vec<f64> = (0..len).map(|i| i as f64 - 0.25).collect();
        let bytes = encode(&v);
        assert_eq!(bytes.len(), varint_len(len) + 8 * len);
        assert_eq!(
            &bytes[varint_len(len)..],
            bytemuck::cast_slice::<f64, u8>(&v)
        );
        // As a slice too, and nested where serde hands it over.
        assert_eq!(encode(&v[..]), bytes);
        assert_eq!(encode(&(7u8, &v)), [&[7][..], &bytes].concat());
        let before = plain::WHOLE_DECODES.load(std::sync::atomic::Ordering::Relaxed);
        let back: Vec<f64> = from_bytes(&bytes).unwrap();
        assert_eq!(back, v);
        let after = plain::WHOLE_DECODES.load(std::sync::atomic::Ordering::Relaxed);
        assert!(after > before, "decoded in one copy");
        let back: (u8, Vec<f64>) = from_bytes(&[&[7][..], &bytes].concat()).unwrap();
        assert_eq!(back.1, v);
    }
    let bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(encode(&bytes)[2..], bytes[..]);
    let back: Vec<i8> = from_bytes(&encode(&vec![-3i8, 4])).unwrap();
    assert_eq!(back, [-3, 4]);
}

#[test]
fn an_integer_sequence_written_in_one_loop_is_postcards_bytes() {
    fn check<T>(edges: &[T])
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + Debug + Copy,
    {
        for len in [0usize, 1, 2, 127, 128, 4097] {
            let v: Vec<T> = edges.iter().copied().cycle().take(len).collect();
            same_as_postcard(&v);
            // A slice, a boxed slice and a vector among other fields, as
            // serde hands each over.
            assert_eq!(encode(&v[..]), encode(&v));
            assert_eq!(encode(&v.clone().into_boxed_slice()), encode(&v));
            same_as_postcard(&(7u8, v.clone(), -1i32));
        }
    }
    check(&[0u16, 1, 127, 128, 16383, 16384, u16::MAX]);
    check(&[0u32, 1, 127, 128, 1 << 21, (1 << 28) - 1, 1 << 28, u32::MAX]);
    check(&[
        0u64,
        1,
        128,
        1 << 35,
        (1 << 56) - 1,
        1 << 56,
        1 << 63,
        u64::MAX,
    ]);
    check(&[0i16, -1, 1, -64, 64, i16::MIN, i16::MAX]);
    check(&[0i32, -1, 1, -65, 1 << 20, i32::MIN, i32::MAX]);
    check(&[0i64, -1, 1, -(1 << 40), 1 << 55, i64::MIN, i64::MAX]);
    check(&[0usize, 1, 300, usize::MAX]);
    check(&[0isize, -1, 300, isize::MIN, isize::MAX]);
    // Nested: each inner vector in one loop.
    same_as_postcard(&vec![vec![1u32, 300], vec![], vec![u32::MAX]]);
    let map: BTreeMap<String, Vec<i64>> = [("a".to_string(), vec![-5, 1 << 40])].into();
    same_as_postcard(&map);
}

/// Calls `f` with every prefix of `bytes` and with `bytes` with each bit
/// flipped in turn.
fn every_cut_and_flip(bytes: &[u8], f: impl Fn(&[u8])) {
    for cut in 0..=bytes.len() {
        f(&bytes[..cut]);
    }
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.to_vec();
            flipped[i] ^= 1 << bit;
            f(&flipped);
        }
    }
}

/// A vector read element by element, through a visitor of its own: what
/// the codec's one loop must agree with.
#[derive(Debug, PartialEq)]
struct ByElement<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ByElement<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ByElement<T>, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Vec<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = s.next_element()? {
                    out.push(x);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
            .map(ByElement)
    }
}

#[test]
fn an_integer_vector_read_in_one_loop_fails_as_element_by_element_does() {
    fn check<T>(edges: &[T])
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + Debug + Copy,
    {
        let v: Vec<T> = edges
            .iter()
            .copied()
            .cycle()
            .take(3 * edges.len())
            .collect();
        let bytes = encode(&(v.clone(), 9u8));
        let before = plain::WHOLE_DECODES.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(from_bytes::<(Vec<T>, u8)>(&bytes), Ok((v.clone(), 9)));
        let after = plain::WHOLE_DECODES.load(std::sync::atomic::Ordering::Relaxed);
        assert!(after > before, "read in one loop");
        let alike = |input: &[u8]| {
            assert_eq!(
                from_bytes::<(Vec<T>, u8)>(input),
                from_bytes::<(ByElement<T>, u8)>(input).map(|(b, x)| (b.0, x)),
                "{input:?}"
            );
        };
        every_cut_and_flip(&bytes, alike);
        // Too long for the type where it is read, far from the end.
        let mut long = vec![2u8];
        long.extend_from_slice(&[0xff; 11]);
        long.extend_from_slice(&[0; 16]);
        alike(&long);
    }
    check(&[0u16, 127, 128, 16384, u16::MAX]);
    check(&[0u32, 127, 128, 1 << 21, u32::MAX]);
    check(&[0u64, 1 << 35, 1 << 63, u64::MAX]);
    check(&[0i16, -1, 64, i16::MIN, i16::MAX]);
    check(&[0i32, -65, 1 << 20, i32::MIN, i32::MAX]);
    check(&[0i64, -(1 << 40), i64::MIN, i64::MAX]);
    check(&[0usize, 300, usize::MAX]);
    check(&[0isize, -300, isize::MIN, isize::MAX]);
    // A length past the input: the end, with nothing read.
    let huge = encode(&(u64::MAX >> 4));
    assert_eq!(from_bytes::<Vec<u32>>(&huge), Err(Error::End));
    assert_eq!(
        from_bytes::<Vec<u32>>(&[&encode(&3usize)[..], &[1, 2]].concat()),
        Err(Error::End)
    );
}

/// A visitor of the user's own that makes a `Vec<f64>` from a sequence of
/// `u32`s: the one-copy path must leave it to read its own way.
#[derive(Debug, PartialEq)]
struct Widened(Vec<f64>);

impl<'de> Deserialize<'de> for Widened {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Widened, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vec<f64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("u32s")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Vec<f64>, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = s.next_element::<u32>()? {
                    out.push(x.into());
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V).map(Widened)
    }
}

#[test]
fn a_users_own_visitor_of_a_vec_of_f64_reads_element_by_element() {
    let bytes = encode(&vec![1u32, 300, 70000]);
    let back: Widened = from_bytes(&bytes).unwrap();
    assert_eq!(back, Widened(vec![1.0, 300.0, 70000.0]));
}

#[test]
fn bad_input_is_an_error_saying_what() {
    let v = encode(&vec![1.0f64; 4]);
    for cut in 0..v.len() {
        assert_eq!(
            from_bytes::<Vec<f64>>(&v[..cut]),
            Err(Error::End),
            "cut at {cut}"
        );
    }
    // A length past the input allocates nothing and fails.
    let huge = encode(&(u64::MAX >> 4));
    assert_eq!(from_bytes::<Vec<f64>>(&huge), Err(Error::End));
    assert_eq!(from_bytes::<Vec<u32>>(&huge), Err(Error::End));
    assert_eq!(from_bytes::<bool>(&[2]), Err(Error::BadBool(2)));
    assert_eq!(from_bytes::<Option<u8>>(&[9, 1]), Err(Error::BadOption(9)));
    assert_eq!(
        from_bytes::<u16>(&[0xff, 0xff, 0x04]),
        Err(Error::BadVarint)
    );
    assert_eq!(from_bytes::<u16>(&[0xff, 0xff, 0x03]), Ok(u16::MAX));
    assert_eq!(from_bytes::<u64>(&[0xff; 11]), Err(Error::BadVarint));
    assert_eq!(from_bytes::<String>(&[2, 0xc3, 0x28]), Err(Error::BadUtf8));
    assert_eq!(from_bytes::<char>(&[2, b'a', b'b']), Err(Error::BadChar));
    assert!(matches!(from_bytes::<Shape>(&[9]), Err(Error::Custom(_))));
    assert!(Error::BadBool(2).to_string().contains("not 0 or 1"));
    // postcard agrees on each.
    for bad in [&[2u8][..], &[0xff, 0xff, 0x04]] {
        assert!(postcard::from_bytes::<(bool, u16)>(bad).is_err());
        assert!(from_bytes::<(bool, u16)>(bad).is_err());
    }
}

#[test]
fn a_sequence_of_unknown_or_wrong_length_is_refused() {
    struct Unknown;
    impl Serialize for Unknown {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq((0..10u8).filter(|x| x % 2 == 0))
        }
    }
    assert_eq!(
        encode_with(&Unknown, Vec::new()).map(|(v, _)| v),
        Err(Error::UnknownLength)
    );
    struct Liar;
    impl Serialize for Liar {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(Lying(3))
        }
    }
    struct Lying(u8);
    impl Iterator for Lying {
        type Item = u8;
        fn next(&mut self) -> Option<u8> {
            self.0 = self.0.checked_sub(1)?;
            Some(self.0)
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            (5, Some(5))
        }
    }
    let err = encode_with(&Liar, Vec::new()).unwrap_err();
    assert!(
        err.to_string().contains("said 5 elements and gave 3"),
        "{err}"
    );
}

#[test]
fn every_cut_and_every_flipped_byte_of_an_encoding_decodes_or_fails_cleanly() {
    let value = (
        (true, Some(7u32), 'é', -5i128, 1u128 << 100),
        vec![1.5f64, -0.0, 1e300],
        b"bytes".to_vec(),
        Vec::<u8>::new(),
        [(3i32, "three".to_string())]
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        vec![vec![2.5f32]],
        (
            vec![-1i8],
            vec![4.0f64].into_boxed_slice(),
            [9u64, u64::MAX],
        ),
    );
    every_cut_and_flip(&encode(&value), fuzz_values);
    // A few lengths near the top of the range.
    for n in [u32::MAX as u64, u64::MAX] {
        fuzz_values(&encode(&n));
    }
}

#[test]
fn varints_of_every_length_decode_alike_near_the_end_and_far_from_it() {
    let mut values: Vec<u64> = (0..64)
        .flat_map(|k| [(1u64 << k) - 1, 1 << k, (1 << k) + 1])
        .collect();
    values.push(u64::MAX);
    for &n in &values {
        let bytes = encode(&n);
        // Alone (the byte-at-a-time path near the end), then with 8
        // bytes after (8 at once), then as a u32 or u16 where it fits.
        let padded = [&bytes[..], &[0xff; 8]].concat();
        assert_eq!(from_bytes::<u64>(&bytes), Ok(n), "{n} alone");
        assert_eq!(from_bytes::<u64>(&padded), Ok(n), "{n} padded");
        let back: (u64, u8) = from_bytes(&[&bytes[..], &[7], &[0; 8]].concat()).unwrap();
        assert_eq!(back, (n, 7), "the input moves past exactly {n}'s bytes");
        for input in [&bytes[..], &padded[..]] {
            let as_u32 = from_bytes::<u32>(input);
            let as_u16 = from_bytes::<u16>(input);
            assert_eq!(
                as_u32,
                postcard::from_bytes::<u32>(input).map_err(|_| Error::BadVarint)
            );
            assert_eq!(
                as_u16,
                postcard::from_bytes::<u16>(input).map_err(|_| Error::BadVarint)
            );
            assert_eq!(as_u32.is_ok(), n <= u32::MAX.into(), "{n} as a u32");
        }
    }
    // Too long for the type, with room to read 8 at once.
    assert_eq!(
        from_bytes::<u16>(&[0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0]),
        Err(Error::BadVarint)
    );
    assert_eq!(
        from_bytes::<u16>(&[0xff, 0xff, 0x04, 0, 0, 0, 0, 0]),
        Err(Error::BadVarint)
    );
    assert_eq!(
        from_bytes::<u32>(&[0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0]),
        Err(Error::BadVarint)
    );
    assert_eq!(
        from_bytes::<u32>(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]),
        Ok(u32::MAX)
    );
    assert_eq!(from_bytes::<u64>(&[0xff; 16]), Err(Error::BadVarint));
}
