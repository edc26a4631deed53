// Captured by Fixtures/capture-flights.py: real clients against openssl s_server with the fixture
// certificates, through a recording relay on 127.0.0.1. Each direction is trimmed after its first
// flight, plus one record cut to its header and 16 bytes that the readers must leave alone.
// Base64, 76-column lines.

public enum TLSReaderVectors {
    /// openssl s_client -tls1_2 -servername api.pinproxy.test (EC P-256 leaf): client → server, 235 bytes.
    public static let opensslTLS12Client = """
        FgMBANEBAADNAwNqMBbvOjLgDJ/J1OirY+fLb9f4MgDjay+7xodTL8tLFQAAOMAswDAAn8ypzKjM
        qsArwC8AnsAkwCgAa8AjwCcAZ8AKwBQAOcAJwBMAMwCdAJwAPQA8ADUALwD/AQAAbAAAABYAFAAA
        EWFwaS5waW5wcm94eS50ZXN0AAsABAMAAQIACgAMAAoAHQAXAB4AGQAYACMAAAAWAAAAFwAAAA0A
        KgAoBAMFAwYDCAcICAgJCAoICwgECAUIBgQBBQEGAQMDAwEDAgQCBQIGAhYDAwAlEAAAISAdKTPz
        KmmjtmAAXA==
        """
    /// openssl s_client -tls1_2 -servername api.pinproxy.test (EC P-256 leaf): server → client, 1974 bytes.
    public static let opensslTLS12Server = """
        FgMDAEECAAA9AwMPQfrOCCvHFzoL9mRK/qwU4Zz7wxZ7jOpET1dOR1JEAQDALAAAFf8BAAEAAAsA
        BAMAAQIAIwAAABcAABYDAwYPCwAGCwAGCAACRTCCAkEwggHHoAMCAQICFCYssPH03eJhJ5ahfoSi
        gPOsG4EsMAoGCCqGSM49BAMCMD4xFzAVBgNVBAoMDnBpbnByb3h5IHRlc3RzMSMwIQYDVQQDDBpw
        aW5wcm94eSBnb29kIGludGVybWVkaWF0ZTAgFw0yNjExMjIwMjQzMjNaGA8yMTI2MTAyOTAyNDMy
        M1owNTEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxGjAYBgNVBAMMEWFwaS5waW5wcm94eS50ZXN0
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExGTmXUL9KaZxG6OkblHlzes77v/GaNtvwkGZ2fhY
        IlAZT71ktvD3FhgOePZ/aWpqIWkwZSjPVdPtWV/rMbhhzKOBqTCBpjAMBgNVHRMBAf8EAjAAMA4G
        A1UdDwEB/wQEAwIFoDATBgNVHSUEDDAKBggrBgEFBQcDATAxBgNVHREEKjAoghFhcGkucGlucHJv
        eHkudGVzdIITKi5hcGkucGlucHJveHkudGVzdDAdBgNVHQ4EFgQUWBE9JfdESNJiZNA9sIVtGlDW
        NlwwHwYDVR0jBBgwFoAUA5lWgxsswRoNJ/4faeCLVaGXZBEwCgYIKoZIzj0EAwIDaAAwZQIwV67C
        bIodBVZO2pAJ8EVc5czeL+05H7shx4icUVHLRm5ug/9cyV3CeSGhf7W7glhPAjEA9T5wxnxQHnue
        +YDAH0GJfCoDorGN9zR8F82SRbBv8+Czo45gOVNGzhDF14R6TKowAAO9MIIDuTCCAaGgAwIBAgIU
        b5/ECtwE7Px+F4EglZwmxrGQodQwDQYJKoZIhvcNAQELBQAwNjEXMBUGA1UECgwOcGlucHJveHkg
        dGVzdHMxGzAZBgNVBAMMEnBpbnByb3h5IGdvb2Qgcm9vdDAgFw0yNjExMjIwMjQzMjNaGA8yMTI2
        MTAyOTAyNDMyM1owPjEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxIzAhBgNVBAMMGnBpbnByb3h5
        IGdvb2QgaW50ZXJtZWRpYXRlMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE+u6RJmdM2SpX9jfjez/H
        gluwmcj6ol8DzpukwtOHyMh9PzVmyMEgV1k1mg7rb7R8NhQmjJbpxTwcevLrfg6mGemoc/pD9i97
        tlLj6lDwc8PuhpB7GL1/nmy7oR0ZXu+Wo2MwYTAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQE
        AwIBBjAdBgNVHQ4EFgQUA5lWgxsswRoNJ/4faeCLVaGXZBEwHwYDVR0jBBgwFoAUZB8eJGUp3CEG
        xjCmcrTmS09hhSgwDQYJKoZIhvcNAQELBQADggIBAIb7MyGSH2bufb0eXmmhVkQxbylNqC3WkEZd
        bQR+JNJY1FR/Dqi7dEss/ddqffwJ3pbwAsWgk6LbcFkTwRukDwibxoq/RzqctfN5Hyh3/KH52y0W
        ea+iMe80NccCLxNc4FYFyNF3v7e+SQjnuQnkAE+AikIOFtnpa9LHBwAuXwKh3j3ZrMDgqbhQMuUV
        DJPC24vlcm0NHvvU0tVTs8bpUJ0LSjCvd0StVtfovgQIJjjwAGF1giD0/rq/SJ8uQX0xOk2qnfI4
        nQYG/IcmkZBjzoBtquUSxus4LIu5rxyerdrFSZv+agbB53Y+fHhAd/jGWDLxtBURU6BinG38dCoG
        5J/lDu1j1ygFPibrTVkVfGPr6Ybt0dnQK0BQSx+igmJcaKq85YYSSbRyh+MOb7RsXR/DcWi6tm5n
        oyogWVDk8jF6jFA7eR5x8/j/3kEP/xlGwM4ynq0YHfUupnU7kZxFLvt3l6XwKWv1WMoA9n7qRBN4
        E/9s+HO3QbQOoSaQWv2dlW7qxgTIGebWp1x/3XxLAMfyRYNYZ/6phUhWJjRWY6wLZ5J6kBXUdcIZ
        VUDeoXS9yrXaVnd4QfD4mFEE1iyj0N9Vw1XfI1fqNuNrw+qK+D6Hm4X7QHJqiuMGprxV64Vmw3iT
        y9SETHmTdaAzkDGRZ3QPayZqF5hIdkh9IfmgP+psFgMDAHQMAABwAwAdIKeLzVvO1Q3PXzoIxsfM
        3giHsWznsQ31JZ57m0BTxOZlBAMASDBGAiEA6cYKtWie5GOUU6Td89nFh7x+70Y/duBG8WuQQnFh
        jeECIQD142vaf9sisDzpoucBqK3LbJ0iVJL6fJa9FPzfgML5whYDAwAEDgAAABYDAwC6BAAAtgAA
        HCAAsDG10yJA/sU9ZVKyf2qEG68c2d/aTCQ79hzx4s1WpCVn1b5c8BupWFuE3c02p2kJPnB55ZFT
        VTg6pX24SGR5nShTl4bG2v4qznRVO80uvTJ1CE02zR2ngRVDHRPgEG6kzd+Fg5ahfTOi/QCtzcr8
        jCQGZeA/RjrjsoAVws/2J3dIkuia5hR0Cqrh7yMqbiIM+Oj2Vy6gaZYAFwdyk8DI/4KNhBAweQ9Q
        K6KN41w0TRtSFAMDAAEBFgMDACiw5SZWl6sxdY17Ecgt14dE
        """
    /// openssl s_client -tls1_3 -servername api.pinproxy.test: client → server, 257 bytes.
    public static let opensslTLS13Client = """
        FgMBAPYBAADyAwP2hJIQo07OKSvozxg+DOnBQokPLdLjxgwo52s9U0gDfSDVPmyEBueeIvVlJZJB
        hvdJeGGy1+pDiAcswl9QxY73mwAIEwITAxMBAP8BAAChAAAAFgAUAAARYXBpLnBpbnByb3h5LnRl
        c3QACwAEAwABAgAKABYAFAAdABcAHgAZABgBAAEBAQIBAwEEACMAAAAWAAAAFwAAAA0AHgAcBAMF
        AwYDCAcICAgJCAoICwgECAUIBgQBBQEGAQArAAMCAwQALQACAQEAMwAmACQAHQAggctoIKuMvtrQ
        V5M3shOGQZwo2B+R7mc0+XgFanYG1T8UAwMAAQE=
        """
    /// openssl s_client -tls1_3 -servername api.pinproxy.test: server → client, 154 bytes.
    public static let opensslTLS13Server = """
        FgMDAHoCAAB2AwN+AiRHW1QngsXRiop2RVRuspcrxd4v9QGluw4jJwJX0SDVPmyEBueeIvVlJZJB
        hvdJeGGy1+pDiAcswl9QxY73mxMCAAAuACsAAgMEADMAJAAdACAg65NtwdkxJq/h4tq3EtdzTB0B
        Coe+1xvBeuoIezMnSxQDAwABARcDAwAXL1dh0PIGWeCIp/hjRnV7cA==
        """
    /// openssl s_client -tls1_2 -noservername: client → server, 209 bytes.
    public static let opensslNoSNIClient = """
        FgMBALcBAACzAwO1UZb5aAGRqkKvrT5SnXfeaedWJSI2rBWeth3wmlqSawAAOMAswDAAn8ypzKjM
        qsArwC8AnsAkwCgAa8AjwCcAZ8AKwBQAOcAJwBMAMwCdAJwAPQA8ADUALwD/AQAAUgALAAQDAAEC
        AAoADAAKAB0AFwAeABkAGAAjAAAAFgAAABcAAAANACoAKAQDBQMGAwgHCAgICQgKCAsIBAgFCAYE
        AQUBBgEDAwMBAwIEAgUCBgIWAwMAJRAAACEgAw72hWPqk/RiDvI=
        """
    /// openssl s_client -tls1_2 -noservername: server → client, 1973 bytes.
    public static let opensslNoSNIServer = """
        FgMDAEECAAA9AwOJ8MlCXYbxWa+pt1OaVm7uZHDCGEHpt89ET1dOR1JEAQDALAAAFf8BAAEAAAsA
        BAMAAQIAIwAAABcAABYDAwYPCwAGCwAGCAACRTCCAkEwggHHoAMCAQICFCYssPH03eJhJ5ahfoSi
        gPOsG4EsMAoGCCqGSM49BAMCMD4xFzAVBgNVBAoMDnBpbnByb3h5IHRlc3RzMSMwIQYDVQQDDBpw
        aW5wcm94eSBnb29kIGludGVybWVkaWF0ZTAgFw0yNjExMjIwMjQzMjNaGA8yMTI2MTAyOTAyNDMy
        M1owNTEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxGjAYBgNVBAMMEWFwaS5waW5wcm94eS50ZXN0
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExGTmXUL9KaZxG6OkblHlzes77v/GaNtvwkGZ2fhY
        IlAZT71ktvD3FhgOePZ/aWpqIWkwZSjPVdPtWV/rMbhhzKOBqTCBpjAMBgNVHRMBAf8EAjAAMA4G
        A1UdDwEB/wQEAwIFoDATBgNVHSUEDDAKBggrBgEFBQcDATAxBgNVHREEKjAoghFhcGkucGlucHJv
        eHkudGVzdIITKi5hcGkucGlucHJveHkudGVzdDAdBgNVHQ4EFgQUWBE9JfdESNJiZNA9sIVtGlDW
        NlwwHwYDVR0jBBgwFoAUA5lWgxsswRoNJ/4faeCLVaGXZBEwCgYIKoZIzj0EAwIDaAAwZQIwV67C
        bIodBVZO2pAJ8EVc5czeL+05H7shx4icUVHLRm5ug/9cyV3CeSGhf7W7glhPAjEA9T5wxnxQHnue
        +YDAH0GJfCoDorGN9zR8F82SRbBv8+Czo45gOVNGzhDF14R6TKowAAO9MIIDuTCCAaGgAwIBAgIU
        b5/ECtwE7Px+F4EglZwmxrGQodQwDQYJKoZIhvcNAQELBQAwNjEXMBUGA1UECgwOcGlucHJveHkg
        dGVzdHMxGzAZBgNVBAMMEnBpbnByb3h5IGdvb2Qgcm9vdDAgFw0yNjExMjIwMjQzMjNaGA8yMTI2
        MTAyOTAyNDMyM1owPjEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxIzAhBgNVBAMMGnBpbnByb3h5
        IGdvb2QgaW50ZXJtZWRpYXRlMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE+u6RJmdM2SpX9jfjez/H
        gluwmcj6ol8DzpukwtOHyMh9PzVmyMEgV1k1mg7rb7R8NhQmjJbpxTwcevLrfg6mGemoc/pD9i97
        tlLj6lDwc8PuhpB7GL1/nmy7oR0ZXu+Wo2MwYTAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQE
        AwIBBjAdBgNVHQ4EFgQUA5lWgxsswRoNJ/4faeCLVaGXZBEwHwYDVR0jBBgwFoAUZB8eJGUp3CEG
        xjCmcrTmS09hhSgwDQYJKoZIhvcNAQELBQADggIBAIb7MyGSH2bufb0eXmmhVkQxbylNqC3WkEZd
        bQR+JNJY1FR/Dqi7dEss/ddqffwJ3pbwAsWgk6LbcFkTwRukDwibxoq/RzqctfN5Hyh3/KH52y0W
        ea+iMe80NccCLxNc4FYFyNF3v7e+SQjnuQnkAE+AikIOFtnpa9LHBwAuXwKh3j3ZrMDgqbhQMuUV
        DJPC24vlcm0NHvvU0tVTs8bpUJ0LSjCvd0StVtfovgQIJjjwAGF1giD0/rq/SJ8uQX0xOk2qnfI4
        nQYG/IcmkZBjzoBtquUSxus4LIu5rxyerdrFSZv+agbB53Y+fHhAd/jGWDLxtBURU6BinG38dCoG
        5J/lDu1j1ygFPibrTVkVfGPr6Ybt0dnQK0BQSx+igmJcaKq85YYSSbRyh+MOb7RsXR/DcWi6tm5n
        oyogWVDk8jF6jFA7eR5x8/j/3kEP/xlGwM4ynq0YHfUupnU7kZxFLvt3l6XwKWv1WMoA9n7qRBN4
        E/9s+HO3QbQOoSaQWv2dlW7qxgTIGebWp1x/3XxLAMfyRYNYZ/6phUhWJjRWY6wLZ5J6kBXUdcIZ
        VUDeoXS9yrXaVnd4QfD4mFEE1iyj0N9Vw1XfI1fqNuNrw+qK+D6Hm4X7QHJqiuMGprxV64Vmw3iT
        y9SETHmTdaAzkDGRZ3QPayZqF5hIdkh9IfmgP+psFgMDAHMMAABvAwAdIJKtfx4H1GnjVB9eAQ42
        OFsIr7nKksQbGCGgvrz3tPdaBAMARzBFAiBFeAk49KYxcEzMXiQt44Q4hSeSpOrSWQHgjpicS0Y4
        1AIhAMdr6VJ1IvAb2PzcOUhD9xTUs5LPVMR1o2+mdb5IKnsdFgMDAAQOAAAAFgMDALoEAAC2AAAc
        IACwMbXTIkD+xT1lUrJ/aoQbr3gGQc3Q1oBemrV00F7tb/uv7xHw1g3O08BIkEOFcTA/uIxbP6/q
        bFg0Y9tk3mBJj8KelSwADWUB6RbXt8lKGTqLVVdwMnFicbo82V5AK4D5ZlxgRZu6BJ4YoPwGD5tl
        tWFXa7KRqLnZsyBxIivRzexNz1o6e/4M8v1mJOQxbbuHTr6fpiTtwMiZyia5NGNdRR+PY+1fviIe
        s1IjBNlQPj8UAwMAAQEWAwMAKBPxgguqubKbSiNDGwwQH7c=
        """
    /// curl --tlsv1.3 https://api.pinproxy.test/: client → server, 523 bytes.
    public static let curlTLS13Client = """
        FgMBAgABAAH8AwMAfDYbqkB/f3FlBY7yK1WZd/PLCooT9R30SvN930fuaCCnoblHDxYZEv0cPS26
        1EL3ZtKx76NW2ULrVRjvNSlPsQAIEwITAxMBAP8BAAGrAAAAFgAUAAARYXBpLnBpbnByb3h5LnRl
        c3QACwAEAwABAgAKABYAFAAdABcAHgAZABgBAAEBAQIBAwEEABAADgAMAmgyCGh0dHAvMS4xABYA
        AAAXAAAAMQAAAA0AHgAcBAMFAwYDCAcICAgJCAoICwgECAUIBgQBBQEGAQArAAMCAwQALQACAQEA
        MwAmACQAHQAgMwEgkbDiqvGfy+nbsNywGOwN63U8L+DoJQbFpT/v6lkAFQD0AAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAABQDAwABAQ==
        """
    /// curl --tlsv1.3 https://api.pinproxy.test/: server → client, 154 bytes.
    public static let curlTLS13Server = """
        FgMDAHoCAAB2AwPwgyQ0WsORmq6u7MNTkvo9JMR1VLUGWCzdwkdkHjzKlyCnoblHDxYZEv0cPS26
        1EL3ZtKx76NW2ULrVRjvNSlPsRMCAAAuACsAAgMEADMAJAAdACB/KFDM1KL0me22iBR0Fn45Nhqx
        r9X6oOPL/pwDzQrJLBQDAwABARcDAwAXDYHWBhVpq4Sch8O0Za403w==
        """
    /// Python ssl.create_default_context(), server_hostname api.pinproxy.test: client → server, 523 bytes.
    public static let pythonTLS13Client = """
        FgMBAgABAAH8AwNQYrORgbPoD80fSgiJJlKCUVcYBEBMVo6apAf6uLe4JSDFovWvlsspFMbau4Nb
        DJHiacXWagbqhGNsfeFbRmXHJwAkEwITAxMBwCzAMMArwC/MqcyowCTAKMAjwCcAnwCeAGsAZwD/
        AQABjwAAABYAFAAAEWFwaS5waW5wcm94eS50ZXN0AAsABAMAAQIACgAWABQAHQAXAB4AGQAYAQAB
        AQECAQMBBAAjAAAAFgAAABcAAAANACoAKAQDBQMGAwgHCAgICQgKCAsIBAgFCAYEAQUBBgEDAwMB
        AwIEAgUCBgIAKwAFBAMEAwMALQACAQEAMwAmACQAHQAgy1Cd7/UG4nze3PZr0gwli6zMgFRQ/6E+
        4WHNhlTmOFYAFQDcAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
        AAAAABQDAwABAQ==
        """
    /// Python ssl.create_default_context(), server_hostname api.pinproxy.test: server → client, 154 bytes.
    public static let pythonTLS13Server = """
        FgMDAHoCAAB2AwMS92dizoaS8lIvaFbhmNE0h+uaNglrwDCVpY2Btxz2dSDFovWvlsspFMbau4Nb
        DJHiacXWagbqhGNsfeFbRmXHJxMCAAAuACsAAgMEADMAJAAdACBppyBL30yQKX0SEz5S9XSM9Wfv
        EPYetZFTB50iTMpDYBQDAwABARcDAwAXZw88JKu3uUHAKXT8O4w7zQ==
        """
    /// openssl s_client -tls1_2 -sess_out: full handshake, the server issues a NewSessionTicket: client → server, 235 bytes.
    public static let ticketFullClient = """
        FgMBANEBAADNAwP6JeWMUEpCEt+jWXvR4wG4F7yAkPu+FGK3FBrP2rK8dAAAOMAswDAAn8ypzKjM
        qsArwC8AnsAkwCgAa8AjwCcAZ8AKwBQAOcAJwBMAMwCdAJwAPQA8ADUALwD/AQAAbAAAABYAFAAA
        EWFwaS5waW5wcm94eS50ZXN0AAsABAMAAQIACgAMAAoAHQAXAB4AGQAYACMAAAAWAAAAFwAAAA0A
        KgAoBAMFAwYDCAcICAgJCAoICwgECAUIBgQBBQEGAQMDAwEDAgQCBQIGAhYDAwAlEAAAISBYCPEO
        fPJvvtO8Tw==
        """
    /// openssl s_client -tls1_2 -sess_out: full handshake, the server issues a NewSessionTicket: server → client, 1972 bytes.
    public static let ticketFullServer = """
        FgMDAEECAAA9AwNc8HKto3oE7A3OTrOfD0C75kzLBq2rIMFET1dOR1JEAQDALAAAFf8BAAEAAAsA
        BAMAAQIAIwAAABcAABYDAwYPCwAGCwAGCAACRTCCAkEwggHHoAMCAQICFCYssPH03eJhJ5ahfoSi
        gPOsG4EsMAoGCCqGSM49BAMCMD4xFzAVBgNVBAoMDnBpbnByb3h5IHRlc3RzMSMwIQYDVQQDDBpw
        aW5wcm94eSBnb29kIGludGVybWVkaWF0ZTAgFw0yNjExMjIwMjQzMjNaGA8yMTI2MTAyOTAyNDMy
        M1owNTEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxGjAYBgNVBAMMEWFwaS5waW5wcm94eS50ZXN0
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExGTmXUL9KaZxG6OkblHlzes77v/GaNtvwkGZ2fhY
        IlAZT71ktvD3FhgOePZ/aWpqIWkwZSjPVdPtWV/rMbhhzKOBqTCBpjAMBgNVHRMBAf8EAjAAMA4G
        A1UdDwEB/wQEAwIFoDATBgNVHSUEDDAKBggrBgEFBQcDATAxBgNVHREEKjAoghFhcGkucGlucHJv
        eHkudGVzdIITKi5hcGkucGlucHJveHkudGVzdDAdBgNVHQ4EFgQUWBE9JfdESNJiZNA9sIVtGlDW
        NlwwHwYDVR0jBBgwFoAUA5lWgxsswRoNJ/4faeCLVaGXZBEwCgYIKoZIzj0EAwIDaAAwZQIwV67C
        bIodBVZO2pAJ8EVc5czeL+05H7shx4icUVHLRm5ug/9cyV3CeSGhf7W7glhPAjEA9T5wxnxQHnue
        +YDAH0GJfCoDorGN9zR8F82SRbBv8+Czo45gOVNGzhDF14R6TKowAAO9MIIDuTCCAaGgAwIBAgIU
        b5/ECtwE7Px+F4EglZwmxrGQodQwDQYJKoZIhvcNAQELBQAwNjEXMBUGA1UECgwOcGlucHJveHkg
        dGVzdHMxGzAZBgNVBAMMEnBpbnByb3h5IGdvb2Qgcm9vdDAgFw0yNjExMjIwMjQzMjNaGA8yMTI2
        MTAyOTAyNDMyM1owPjEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxIzAhBgNVBAMMGnBpbnByb3h5
        IGdvb2QgaW50ZXJtZWRpYXRlMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE+u6RJmdM2SpX9jfjez/H
        gluwmcj6ol8DzpukwtOHyMh9PzVmyMEgV1k1mg7rb7R8NhQmjJbpxTwcevLrfg6mGemoc/pD9i97
        tlLj6lDwc8PuhpB7GL1/nmy7oR0ZXu+Wo2MwYTAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQE
        AwIBBjAdBgNVHQ4EFgQUA5lWgxsswRoNJ/4faeCLVaGXZBEwHwYDVR0jBBgwFoAUZB8eJGUp3CEG
        xjCmcrTmS09hhSgwDQYJKoZIhvcNAQELBQADggIBAIb7MyGSH2bufb0eXmmhVkQxbylNqC3WkEZd
        bQR+JNJY1FR/Dqi7dEss/ddqffwJ3pbwAsWgk6LbcFkTwRukDwibxoq/RzqctfN5Hyh3/KH52y0W
        ea+iMe80NccCLxNc4FYFyNF3v7e+SQjnuQnkAE+AikIOFtnpa9LHBwAuXwKh3j3ZrMDgqbhQMuUV
        DJPC24vlcm0NHvvU0tVTs8bpUJ0LSjCvd0StVtfovgQIJjjwAGF1giD0/rq/SJ8uQX0xOk2qnfI4
        nQYG/IcmkZBjzoBtquUSxus4LIu5rxyerdrFSZv+agbB53Y+fHhAd/jGWDLxtBURU6BinG38dCoG
        5J/lDu1j1ygFPibrTVkVfGPr6Ybt0dnQK0BQSx+igmJcaKq85YYSSbRyh+MOb7RsXR/DcWi6tm5n
        oyogWVDk8jF6jFA7eR5x8/j/3kEP/xlGwM4ynq0YHfUupnU7kZxFLvt3l6XwKWv1WMoA9n7qRBN4
        E/9s+HO3QbQOoSaQWv2dlW7qxgTIGebWp1x/3XxLAMfyRYNYZ/6phUhWJjRWY6wLZ5J6kBXUdcIZ
        VUDeoXS9yrXaVnd4QfD4mFEE1iyj0N9Vw1XfI1fqNuNrw+qK+D6Hm4X7QHJqiuMGprxV64Vmw3iT
        y9SETHmTdaAzkDGRZ3QPayZqF5hIdkh9IfmgP+psFgMDAHIMAABuAwAdID62OEZyhO6DLPCqbCpF
        OKlIfohAmklrKi6AXjG5ZQIVBAMARjBEAiBLU/GxDZnFeUPqgyuO8KDt1zH1UnoBWQP46GBqnF2X
        WQIgBN1bnIpRRJT/U8GWoK0z86NydfwqzFDU5uY8JnpXyfQWAwMABA4AAAAWAwMAugQAALYAABwg
        ALAxtdMiQP7FPWVSsn9qhBuvvJxrJdBXZxgAJpc3Atu/b3I7snWZCxYmPcvPRCfCUvm9LhP4wbV/
        /Ix9D1HdwjKexo4AbWan87wwCW1LLVItQSRwp7ZKhQNp+wKVaLRBCW9igkFmrqnIxRocbaSHURCk
        qP/z+W0c57/rN6Dz4OWNnH79v6hdfz7K/VGuQePUC+S9fCLQCnKhQGQ3b0M3bKcaN6pWYPthJxJ7
        YQjFrk1vDhQDAwABARYDAwAoQP1uX47fUbQFpEnI3RX8xg==
        """
    /// openssl s_client -tls1_2 -sess_in: abbreviated handshake resuming with the ticket: client → server, 428 bytes.
    public static let ticketResumedClient = """
        FgMBAaEBAAGdAwMrskOpDKnskmWbApg3szMTtMHJ+/5EQM5Ymqvrte3D7iCJ6n+2EZNF9BLEpReI
        GbltBtvQyYzhotT4GVeEJzZheQA4wCzAMACfzKnMqMyqwCvALwCewCTAKABrwCPAJwBnwArAFAA5
        wAnAEwAzAJ0AnAA9ADwANQAvAP8BAAEcAAAAFgAUAAARYXBpLnBpbnByb3h5LnRlc3QACwAEAwAB
        AgAKAAwACgAdABcAHgAZABgAIwCwMbXTIkD+xT1lUrJ/aoQbr7ycayXQV2cYACaXNwLbv29yO7J1
        mQsWJj3Lz0QnwlL5vS4T+MG1f/yMfQ9R3cIynsaOAG1mp/O8MAltSy1SLUEkcKe2SoUDafsClWi0
        QQlvYoJBZq6pyMUaHG2kh1EQpKj/8/ltHOe/6zeg8+DljZx+/b+oXX8+yv1RrkHj1AvkvXwi0Apy
        oUBkN29DN2ynGjeqVmD7YScSe2EIxa5Nbw4AFgAAABcAAAANACoAKAQDBQMGAwgHCAgICQgKCAsI
        BAgFCAYEAQUBBgEDAwMBAwIEAgUCBgIUAwMAAQE=
        """
    /// openssl s_client -tls1_2 -sess_in: abbreviated handshake resuming with the ticket: server → client, 117 bytes.
    public static let ticketResumedServer = """
        FgMDAFUCAABRAwMyzBEgX6fncAuIRNnRoUGdM4dDi1xfBRVET1dOR1JEASCJ6n+2EZNF9BLEpReI
        GbltBtvQyYzhotT4GVeEJzZhecAsAAAJ/wEAAQAAFwAAFAMDAAEBFgMDACgaJp/qhsCf+HUP9guS
        w6Qs
        """
    /// openssl s_client -tls1_2 -no_ticket -sess_out: full handshake, session id only: client → server, 231 bytes.
    public static let sessionIDFullClient = """
        FgMBAM0BAADJAwNwqNXZhreR/2dLqeHaxRrfsMh1zq32ERVHChrX4JY0NAAAOMAswDAAn8ypzKjM
        qsArwC8AnsAkwCgAa8AjwCcAZ8AKwBQAOcAJwBMAMwCdAJwAPQA8ADUALwD/AQAAaAAAABYAFAAA
        EWFwaS5waW5wcm94eS50ZXN0AAsABAMAAQIACgAMAAoAHQAXAB4AGQAYABYAAAAXAAAADQAqACgE
        AwUDBgMIBwgICAkICggLCAQIBQgGBAEFAQYBAwMDAQMCBAIFAgYCFgMDACUQAAAhIA+IDkyHp/gJ
        0yYL
        """
    /// openssl s_client -tls1_2 -no_ticket -sess_out: full handshake, session id only: server → client, 1809 bytes.
    public static let sessionIDFullServer = """
        FgMDAF0CAABZAwO76m39zJLEYKqg3KG8/drCNPI7YuDbp81ET1dOR1JEASCghHTcM+v2Zw0D1mIr
        u4//OvDRMdc/j5WSw22Sbiot28AsAAAR/wEAAQAACwAEAwABAgAXAAAWAwMGDwsABgsABggAAkUw
        ggJBMIIBx6ADAgECAhQmLLDx9N3iYSeWoX6EooDzrBuBLDAKBggqhkjOPQQDAjA+MRcwFQYDVQQK
        DA5waW5wcm94eSB0ZXN0czEjMCEGA1UEAwwacGlucHJveHkgZ29vZCBpbnRlcm1lZGlhdGUwIBcN
        MjYxMTIyMDI0MzIzWhgPMjEyNjEwMjkwMjQzMjNaMDUxFzAVBgNVBAoMDnBpbnByb3h5IHRlc3Rz
        MRowGAYDVQQDDBFhcGkucGlucHJveHkudGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABMRk
        5l1C/SmmcRujpG5R5c3rO+7/xmjbb8JBmdn4WCJQGU+9ZLbw9xYYDnj2f2lqaiFpMGUoz1XT7Vlf
        6zG4YcyjgakwgaYwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMCBaAwEwYDVR0lBAwwCgYIKwYB
        BQUHAwEwMQYDVR0RBCowKIIRYXBpLnBpbnByb3h5LnRlc3SCEyouYXBpLnBpbnByb3h5LnRlc3Qw
        HQYDVR0OBBYEFFgRPSX3REjSYmTQPbCFbRpQ1jZcMB8GA1UdIwQYMBaAFAOZVoMbLMEaDSf+H2ng
        i1Whl2QRMAoGCCqGSM49BAMCA2gAMGUCMFeuwmyKHQVWTtqQCfBFXOXM3i/tOR+7IceInFFRy0Zu
        boP/XMldwnkhoX+1u4JYTwIxAPU+cMZ8UB57nvmAwB9BiXwqA6Kxjfc0fBfNkkWwb/Pgs6OOYDlT
        Rs4QxdeEekyqMAADvTCCA7kwggGhoAMCAQICFG+fxArcBOz8fheBIJWcJsaxkKHUMA0GCSqGSIb3
        DQEBCwUAMDYxFzAVBgNVBAoMDnBpbnByb3h5IHRlc3RzMRswGQYDVQQDDBJwaW5wcm94eSBnb29k
        IHJvb3QwIBcNMjYxMTIyMDI0MzIzWhgPMjEyNjEwMjkwMjQzMjNaMD4xFzAVBgNVBAoMDnBpbnBy
        b3h5IHRlc3RzMSMwIQYDVQQDDBpwaW5wcm94eSBnb29kIGludGVybWVkaWF0ZTB2MBAGByqGSM49
        AgEGBSuBBAAiA2IABPrukSZnTNkqV/Y343s/x4JbsJnI+qJfA86bpMLTh8jIfT81ZsjBIFdZNZoO
        62+0fDYUJoyW6cU8HHry634OphnpqHP6Q/Yve7ZS4+pQ8HPD7oaQexi9f55su6EdGV7vlqNjMGEw
        DwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwHQYDVR0OBBYEFAOZVoMbLMEaDSf+H2ng
        i1Whl2QRMB8GA1UdIwQYMBaAFGQfHiRlKdwhBsYwpnK05ktPYYUoMA0GCSqGSIb3DQEBCwUAA4IC
        AQCG+zMhkh9m7n29Hl5poVZEMW8pTagt1pBGXW0EfiTSWNRUfw6ou3RLLP3Xan38Cd6W8ALFoJOi
        23BZE8EbpA8Im8aKv0c6nLXzeR8od/yh+dstFnmvojHvNDXHAi8TXOBWBcjRd7+3vkkI57kJ5ABP
        gIpCDhbZ6WvSxwcALl8Cod492azA4Km4UDLlFQyTwtuL5XJtDR771NLVU7PG6VCdC0owr3dErVbX
        6L4ECCY48ABhdYIg9P66v0ifLkF9MTpNqp3yOJ0GBvyHJpGQY86AbarlEsbrOCyLua8cnq3axUmb
        /moGwed2Pnx4QHf4xlgy8bQVEVOgYpxt/HQqBuSf5Q7tY9coBT4m601ZFXxj6+mG7dHZ0CtAUEsf
        ooJiXGiqvOWGEkm0cofjDm+0bF0fw3FourZuZ6MqIFlQ5PIxeoxQO3kecfP4/95BD/8ZRsDOMp6t
        GB31LqZ1O5GcRS77d5el8Clr9VjKAPZ+6kQTeBP/bPhzt0G0DqEmkFr9nZVu6sYEyBnm1qdcf918
        SwDH8kWDWGf+qYVIViY0VmOsC2eSepAV1HXCGVVA3qF0vcq12lZ3eEHw+JhRBNYso9DfVcNV3yNX
        6jbja8Pqivg+h5uF+0ByaorjBqa8VeuFZsN4k8vUhEx5k3WgM5AxkWd0D2smaheYSHZIfSH5oD/q
        bBYDAwByDAAAbgMAHSCKYVamEtS/H4wKO+BhBFJOD/mX1ePROwbS76cnFyPYGwQDAEYwRAIgaFtV
        Y4Fy/ux5m0P46bcAcaLYsOVsWb4r2d2YROW8GhoCIFlQWYy9bQijdSdg6xwtd3Bn47PrGNNMa5DW
        WlA8COQJFgMDAAQOAAAAFAMDAAEBFgMDACisyk6NNfABNI6HyUE7JgfS
        """
    /// openssl s_client -tls1_2 -no_ticket -sess_in: abbreviated handshake resuming the session id: client → server, 248 bytes.
    public static let sessionIDResumedClient = """
        FgMBAO0BAADpAwPJxaJCeLMc5af8+jLIP4RnkI8+FADGzeBXcxTQDzW0/iCghHTcM+v2Zw0D1mIr
        u4//OvDRMdc/j5WSw22Sbiot2wA4wCzAMACfzKnMqMyqwCvALwCewCTAKABrwCPAJwBnwArAFAA5
        wAnAEwAzAJ0AnAA9ADwANQAvAP8BAABoAAAAFgAUAAARYXBpLnBpbnByb3h5LnRlc3QACwAEAwAB
        AgAKAAwACgAdABcAHgAZABgAFgAAABcAAAANACoAKAQDBQMGAwgHCAgICQgKCAsIBAgFCAYEAQUB
        BgEDAwMBAwIEAgUCBgIUAwMAAQE=
        """
    /// openssl s_client -tls1_2 -no_ticket -sess_in: abbreviated handshake resuming the session id: server → client, 117 bytes.
    public static let sessionIDResumedServer = """
        FgMDAFUCAABRAwOhl2whVjgF9sK0pgEsrc8bAEWIKj/CPMtET1dOR1JEASCghHTcM+v2Zw0D1mIr
        u4//OvDRMdc/j5WSw22Sbiot28AsAAAJ/wEAAQAAFwAAFAMDAAEBFgMDAChBInStVcFUru0L0tXW
        K04+
        """
    /// openssl s_client -tls1_3 -sess_in: resumption with a TLS 1.3 ticket (pre_shared_key): client → server, 528 bytes.
    public static let pskResumedClient = """
        FgMBAgUBAAIBAwN4v8wK6zhR0ltx+qr2r4GGQZ9qGmZRhsBM1FbwlyAYQiBfOUjIzEBC+vWQd2SY
        YLWf7SZrK6O0lngb+vKAvBF8zgAIEwITAxMBAP8BAAGwAAAAFgAUAAARYXBpLnBpbnByb3h5LnRl
        c3QACwAEAwABAgAKABYAFAAdABcAHgAZABgBAAEBAQIBAwEEACMAAAAWAAAAFwAAAA0AHgAcBAMF
        AwYDCAcICAgJCAoICwgECAUIBgQBBQEGAQArAAMCAwQALQACAQEAMwAmACQAHQAgpurctwfkkG4d
        Gclx8XcaG44ykCpFinJWD0AQ+//ffm8AKQELANYA0DG10yJA/sU9ZVKyf2qEG6+iTat6UuNSjDfR
        M+TSbADMMtmlxz/6SrlVpAo02OJC2qQKTLsx0ZDeFV09IOTMs0MJ/FEXPkStW9fvjlejXIZHnazi
        xob0zIU5+W3H5rG235xyrq5Y0MYRZ5m4Gyq5BYFI1hJUvCnZPr/BK3LFCKTydeZiwAejTydAW7q5
        4dhlmy8xIc1AhVPJe1KulPvaXpBiTkd4F5Hj+ZJpC+tDHLSozuDhsuFuwFpPFBdUvWbejIx9umIO
        lc8GZIVc3hOF+XkE3Lr8ADEw13BCx8qrFZu5mw+DBVlTdJhSfNOmgXdKb2ZDm/L/+esaNvOJhPiE
        jHtGiRdkSODVFAMDAAEB
        """
    /// openssl s_client -tls1_3 -sess_in: resumption with a TLS 1.3 ticket (pre_shared_key): server → client, 160 bytes.
    public static let pskResumedServer = """
        FgMDAIACAAB8AwNdnOPRl/s086WSDHbiFHybXFy81DmKKd+5I+L+tFc20iBfOUjIzEBC+vWQd2SY
        YLWf7SZrK6O0lngb+vKAvBF8zhMCAAA0ACsAAgMEADMAJAAdACDgPwQU4usdk0Q9ehb2cwsid1rw
        WyTDLFbmznW64V4MAAApAAIAABQDAwABARcDAwAXFs2ltk8t/1ZZ8xzMf3QYKQ==
        """
    /// curl --tlsv1.2 --tls-max 1.2 https://api.pinproxy.test/ (RSA 2048 leaf): client → server, 249 bytes.
    public static let curlTLS12Client = """
        FgMBAN8BAADbAwOGClHB+mm6kdhrouv5a4M1Izsvx7VhdpAkKyiv2/uWrQAAOMAswDAAn8ypzKjM
        qsArwC8AnsAkwCgAa8AjwCcAZ8AKwBQAOcAJwBMAMwCdAJwAPQA8ADUALwD/AQAAegAAABYAFAAA
        EWFwaS5waW5wcm94eS50ZXN0AAsABAMAAQIACgAMAAoAHQAXAB4AGQAYABAADgAMAmgyCGh0dHAv
        MS4xABYAAAAXAAAADQAqACgEAwUDBgMIBwgICAkICggLCAQIBQgGBAEFAQYBAwMDAQMCBAIFAgYC
        FgMDACUQAAAhIK617ZM4OMOMwFad
        """
    /// curl --tlsv1.2 --tls-max 1.2 https://api.pinproxy.test/ (RSA 2048 leaf): server → client, 2198 bytes.
    public static let curlTLS12Server = """
        FgMDAF0CAABZAwOUGyv2Hhk3Ky892GleFLNoxXeS5PzfLAxET1dOR1JEASAOI5dQtP3MXwnAnrHV
        T4MNXcDe0I5uU5KWOCJhOFSv5cAwAAAR/wEAAQAACwAEAwABAgAXAAAWAwMG2gsABtYABtMAAxAw
        ggMMMIICkqADAgECAhQmLLDx9N3iYSeWoX6EooDzrBuBKzAKBggqhkjOPQQDAjA+MRcwFQYDVQQK
        DA5waW5wcm94eSB0ZXN0czEjMCEGA1UEAwwacGlucHJveHkgZ29vZCBpbnRlcm1lZGlhdGUwIBcN
        MjYxMTIyMDI0MzIzWhgPMjEyNjEwMjkwMjQzMjNaMDUxFzAVBgNVBAoMDnBpbnByb3h5IHRlc3Rz
        MRowGAYDVQQDDBFhcGkucGlucHJveHkudGVzdDCCASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoC
        ggEBALz4E8EN0qG0JUdNQhB3+rkx1Y6515UNpWQMgWijglj87LRNaaLgSi02C9AbdtwX2GwZoGID
        mkdmI+wxEilvqWlshHkSi6/UQO1cD1RzVA6bJWBI424upDk5XhCYcFxqxKquZmZgUEGXdwn+0ZIk
        15AnqLZJYTsvIpUvegKwP/IO2g2lE2J/YU7Tsqv/tsMC+ytUipGeBFXyyVwpA9TmZebRc32usu4g
        s6hgdZcF794qHwZ7r9R+KKQept9VXCduAqe5NSE5a3/McGXAZAtln6z9pWx03JrR9g2OqbxSjJgL
        kbsY5ipvMH3Hh7F2iNsgkCYvBjYeW+9t+ky/SZ8qWyUCAwEAAaOBqTCBpjAMBgNVHRMBAf8EAjAA
        MA4GA1UdDwEB/wQEAwIFoDATBgNVHSUEDDAKBggrBgEFBQcDATAxBgNVHREEKjAoghFhcGkucGlu
        cHJveHkudGVzdIITKi5hcGkucGlucHJveHkudGVzdDAdBgNVHQ4EFgQU629xdZkQV/p3Ua8NvAT4
        K46du0swHwYDVR0jBBgwFoAUA5lWgxsswRoNJ/4faeCLVaGXZBEwCgYIKoZIzj0EAwIDaAAwZQIx
        AMpCLXcGU2THko/WB5BFw7ZsT+EAhahO6kW7TNM4EeC+jAGj3Km9vHE4zmZRmuphKQIwNtC5xr1E
        +0kgxAot8PZo+/Rzf5H+pR6QYkeQMcO77F2LtSRMnOoRlJvB7RvaT/oLAAO9MIIDuTCCAaGgAwIB
        AgIUb5/ECtwE7Px+F4EglZwmxrGQodQwDQYJKoZIhvcNAQELBQAwNjEXMBUGA1UECgwOcGlucHJv
        eHkgdGVzdHMxGzAZBgNVBAMMEnBpbnByb3h5IGdvb2Qgcm9vdDAgFw0yNjExMjIwMjQzMjNaGA8y
        MTI2MTAyOTAyNDMyM1owPjEXMBUGA1UECgwOcGlucHJveHkgdGVzdHMxIzAhBgNVBAMMGnBpbnBy
        b3h5IGdvb2QgaW50ZXJtZWRpYXRlMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE+u6RJmdM2SpX9jfj
        ez/Hgluwmcj6ol8DzpukwtOHyMh9PzVmyMEgV1k1mg7rb7R8NhQmjJbpxTwcevLrfg6mGemoc/pD
        9i97tlLj6lDwc8PuhpB7GL1/nmy7oR0ZXu+Wo2MwYTAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB
        /wQEAwIBBjAdBgNVHQ4EFgQUA5lWgxsswRoNJ/4faeCLVaGXZBEwHwYDVR0jBBgwFoAUZB8eJGUp
        3CEGxjCmcrTmS09hhSgwDQYJKoZIhvcNAQELBQADggIBAIb7MyGSH2bufb0eXmmhVkQxbylNqC3W
        kEZdbQR+JNJY1FR/Dqi7dEss/ddqffwJ3pbwAsWgk6LbcFkTwRukDwibxoq/RzqctfN5Hyh3/KH5
        2y0Wea+iMe80NccCLxNc4FYFyNF3v7e+SQjnuQnkAE+AikIOFtnpa9LHBwAuXwKh3j3ZrMDgqbhQ
        MuUVDJPC24vlcm0NHvvU0tVTs8bpUJ0LSjCvd0StVtfovgQIJjjwAGF1giD0/rq/SJ8uQX0xOk2q
        nfI4nQYG/IcmkZBjzoBtquUSxus4LIu5rxyerdrFSZv+agbB53Y+fHhAd/jGWDLxtBURU6BinG38
        dCoG5J/lDu1j1ygFPibrTVkVfGPr6Ybt0dnQK0BQSx+igmJcaKq85YYSSbRyh+MOb7RsXR/DcWi6
        tm5noyogWVDk8jF6jFA7eR5x8/j/3kEP/xlGwM4ynq0YHfUupnU7kZxFLvt3l6XwKWv1WMoA9n7q
        RBN4E/9s+HO3QbQOoSaQWv2dlW7qxgTIGebWp1x/3XxLAMfyRYNYZ/6phUhWJjRWY6wLZ5J6kBXU
        dcIZVUDeoXS9yrXaVnd4QfD4mFEE1iyj0N9Vw1XfI1fqNuNrw+qK+D6Hm4X7QHJqiuMGprxV64Vm
        w3iTy9SETHmTdaAzkDGRZ3QPayZqF5hIdkh9IfmgP+psFgMDASwMAAEoAwAdICvAm4h/Uew51Tsk
        1DYntIgp8y5LU9tnyst6GqQ6qkpYCAQBAH4EJVOKATaMz9eTuCEMBmGL65GrkKk1bTfb2rroONE5
        cI+BpoELJ/JUVsbtEzETvoTuNQoLMn4zoMvIeiIoxAGPFwavp6j7J5gJ1aGnNN3cHHYn5Q/L5D2r
        HMmN3F9oMCDsGaRn2gwakovmpycdc+nP+Z7FwU4Da7fdRgp1BhHtMOXMH1zHSzL52uTCKJTCmMWe
        mz4aEXtQ6uUq9nGSGTiEZyB8dvHnlodWAK1vuFGywNS70vAxV7l3D+w4zwyYN+Ad9X2SRASqxuQp
        rfb5ZVpkLf0DVc7AHmG/h0Bsr+jc8dAFY+L/+grEzcoTtLil12heO0QA39Dc4TPhs9iWKLMWAwMA
        BA4AAAAUAwMAAQEWAwMAKL7tuvT7UnxcdgiTHllUJLI=
        """
    /// s_server -groups P-384 vs s_client -tls1_3 -groups X25519:P-384 (key share for X25519 only): client → server, 241 bytes.
    public static let helloRetryRequestClient = """
        FgMBAOYBAADiAwO9AlML0Kby3TRprYdLP8n6WPZKD5zaVVc60Pi/fB2vgCB0idzjwHhCPjkqqIDw
        RMcHHSVM5l4W6l2wfJ4rS0tUvwAIEwITAxMBAP8BAACRAAAAFgAUAAARYXBpLnBpbnByb3h5LnRl
        c3QACwAEAwABAgAKAAYABAAdABgAIwAAABYAAAAXAAAADQAeABwEAwUDBgMIBwgICAkICggLCAQI
        BQgGBAEFAQYBACsAAwIDBAAtAAIBAQAzACYAJAAdACBvVcDGBckq6uOf6QyQtiFtEVS1c6pVAvps
        tbPSjG//MhQDAwABAQ==
        """
    /// s_server -groups P-384 vs s_client -tls1_3 -groups X25519:P-384 (key share for X25519 only): server → client, 312 bytes.
    public static let helloRetryRequestServer = """
        FgMDAFgCAABUAwPPIa105ZphEb4djAIeZbiRwqIRFnq7jF4HngniyKgznCB0idzjwHhCPjkqqIDw
        RMcHHSVM5l4W6l2wfJ4rS0tUvxMCAAAMACsAAgMEADMAAgAYFAMDAAEBFgMDALsCAAC3AwOpEox7
        5S3G7xmBhHwQKHfztb2zVXQ8wKXK/uxYvNGtbSB0idzjwHhCPjkqqIDwRMcHHSVM5l4W6l2wfJ4r
        S0tUvxMCAABvACsAAgMEADMAZQAYAGEEaxnP/aR4BG0xVD5a/7JbddmqLbWWWjNLx8CfxcQ5UKd6
        s5lkwevlYL5CFYOhtRdL2dwDoLk8AcW0x1s15SZtp2KUa2AbVIIaxFNiAnT4lCjGkO7EsUBbu3nd
        hqQ58ktWFwMDABdi50YxKMw0khF3bC4gmpXD
        """
}
