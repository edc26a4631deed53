// libFuzzer harness for the plain-HTTP message rules (Sources/ProxyCore/PlainHTTP.swift): the
// request and response head parsers and the body meter, the newest parsers on untrusted input.
// Built by Fuzz/run.sh with the sources it needs (SwiftPM cannot link a fuzzer executable).
//
// The first input byte picks the target; the rest is its input. Besides "does not crash":
//   0  a request pinproxy accepts is written upstream as a head it would read back as the same
//      request — within the 100-field limit, `Via` and `Host` included (the harness's first
//      finding was `Via` added to a request that already had 100 fields);
//   1  a response head's status is three digits or nothing, and its framing is decided;
//   2  the body meter gives the same answer however the bytes are sliced, and read the way the
//      de-chunking forwarder reads it (framing through the meter, data counted unseen).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 2, count: size - 2))
    let knob = Int(data[1])
    switch data[0] % 3 {
    case 0: request(bytes, knob: knob)
    case 1: response(bytes, knob: knob)
    default: body(bytes, slice: knob % 17 + 1, chunked: knob & 0x80 == 0)
    }
    return 0
}

private func request(_ bytes: [UInt8], knob: Int) {
    guard case .success(let request) = PlainRequest.parse(head: bytes) else { return }
    let parent = knob & 1 == 0 ? nil : UpstreamProxy(address: SocketAddress.parse("127.0.0.1:3128")!, authorization: "Basic cDpx")
    guard case .success(let upstream) = request.upstreamHead(viaParent: parent) else { return }
    let written = upstream.bytes
    guard case .success(let again) = HTTPHead.parse(written) else { fatalError("pinproxy writes a head it would not read: \(upstream.fields.count) fields") }
    precondition(again.fields.count <= ConnectRequest.maxHeaders, "more than 100 fields written")
    precondition(again == upstream, "the written head does not read back as itself")
    precondition(again.values("Via").count >= 1 && again.values("Host").count == 1, "Host or Via missing")
    if parent != nil {
        // Absolute-form to a parent: the parent reads the same request, with the same framing.
        guard case .success(let forwarded) = PlainRequest.parse(head: written) else { fatalError("a parent would refuse what pinproxy forwards") }
        precondition(forwarded.method == request.method && forwarded.authority == request.authority && forwarded.path == request.path,
                     "the parent would see another target")
        precondition(forwarded.body == request.body, "the parent would see another body length")
    }
}

private func response(_ bytes: [UInt8], knob: Int) {
    guard case .success(let head) = HTTPHead.parse(bytes) else { return }
    if let status = head.statusCode {
        precondition((0...999).contains(status) && head.start.1.utf8.count == 3, "a status that is not three digits")
    }
    _ = head.bodyLength(isResponse: true, requestMethod: knob & 1 == 0 ? "GET" : "HEAD")
    var copy = head
    copy.removeHopByHop()
    precondition(copy.fields.count <= head.fields.count)
}

/// The meter's verdict on `bytes` fed `slice` bytes at a time: bytes used, done, the error.
private func meter(_ length: BodyLength, _ bytes: [UInt8], slice: Int, asForwarder: Bool) -> (Int, Bool, String?) {
    var meter = BodyMeter(length)
    var used = 0
    var rounds = 0
    while used < bytes.count && !meter.isDone {
        rounds += 1
        precondition(rounds <= 2 * bytes.count + 2, "the meter makes no progress")
        if asForwarder, let ahead = meter.plainBytesAhead {
            let take = min(ahead, slice, bytes.count - used)
            meter.consume(count: take)
            used += take
            continue
        }
        let end = min(bytes.count, used + slice)
        let step = bytes[used..<end].withUnsafeBytes { meter.consume($0, stopAtData: asForwarder) }
        switch step {
        case .consumed(let n):
            precondition(n <= end - used, "consumed more than it was given")
            if n == 0 && !asForwarder { return (used, meter.isDone, nil) }
            used += n
        case .malformed(let why):
            return (used, false, why)
        }
    }
    return (used, meter.isDone, nil)
}

private func body(_ bytes: [UInt8], slice: Int, chunked: Bool) {
    let length: BodyLength = chunked ? .chunked : .length(bytes.count / 2)
    let whole = meter(length, bytes, slice: max(bytes.count, 1), asForwarder: false)
    let sliced = meter(length, bytes, slice: slice, asForwarder: false)
    let forwarded = meter(length, bytes, slice: slice, asForwarder: true)
    // Where an error stops the meter may differ by slice (it stops at the slice's start); the
    // verdict may not.
    precondition(whole.1 == sliced.1 && whole.2 == sliced.2 && (whole.2 != nil || whole.0 == sliced.0), "slicing changes the verdict")
    precondition(whole.1 == forwarded.1 && whole.2 == forwarded.2 && (whole.2 != nil || whole.0 == forwarded.0), "de-chunking reads another body")
}
