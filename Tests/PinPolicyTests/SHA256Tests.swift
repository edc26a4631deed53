import Testing
@testable import PinPolicy

/// FIPS 180-4's examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf"): the hash behind the log
/// list's `log_id` = SHA-256(`key`) check.
@Suite struct SHA256Tests {
    func hex(_ text: String) -> String { hex(Array(text.utf8)) }
    func hex(_ bytes: [UInt8]) -> String { SHA256.hash(bytes).map { String($0, radix: 16).leftPadded }.joined() }

    @Test func oneBlockMessage() {
        #expect(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func emptyMessage() {
        #expect(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func twoBlockMessage() {
        #expect(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    /// 55 and 56 bytes: the padding's length field fits in the last block, then no longer does.
    @Test func paddingBoundaries() {
        #expect(hex(Array(repeating: 0x61, count: 55)) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318")
        #expect(hex(Array(repeating: 0x61, count: 56)) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
        #expect(hex(Array(repeating: 0x61, count: 64)) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }

    @Test func millionA() {
        #expect(hex(Array(repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}

private extension String {
    var leftPadded: String { count == 1 ? "0" + self : self }
}
