"""A model's config.json sent from the page: the file, or the text pasted, read out of a multipart/form-data body.

Sent in the body, so a pretty-printed config of up to 64 KB is read whole: in a GET form's address it would
meet the app's address limit (app/serving/cache.py, 8 KB) first.

The body comes capped (app/serving/body.py); the standard library's email parser reads its parts, as
multipart/form-data is MIME (RFC 7578), so no parser of our own is written and no dependency added.
"""

from __future__ import annotations

from email.errors import MessageError
from email.parser import BytesParser
from email.policy import HTTP

MAX_UPLOAD_BYTES = 64 * 1024 + 4 * 1024
"""A config.json of 64 KB and the form's own few hundred bytes of headers, with room to spare."""
FILE_FIELD = "file"
"""The upload form's file input."""
TEXT_FIELD = "text"
"""The upload form's box for a pasted config.json, read where no file was chosen."""


class UploadRefused(ValueError):
    """An upload that holds no config.json to read, with the sentence to say and the status to answer."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def uploaded_text(body: bytes, content_type: str) -> str:
    """The uploaded file's text. Raises UploadRefused where there is none, or it is not UTF-8."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise UploadRefused("Send the file as the page's form does: multipart/form-data.", 415)
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    try:
        message = BytesParser(policy=HTTP).parsebytes(head + body)
        parts = list(message.iter_parts()) if message.is_multipart() else []
        named = {p.get_param("name", header="content-disposition"): p for p in parts}
        datas = [named[n].get_payload(decode=True) if n in named else None for n in (FILE_FIELD, TEXT_FIELD)]
    except (MessageError, ValueError, LookupError, TypeError) as error:
        raise UploadRefused("The upload could not be read: choose a config.json and send the form again.") from error
    # A file chosen wins over the box; an empty file input still sends an empty part.
    data = next((d for d in datas if isinstance(d, bytes) and d.strip()), None)
    if data is None:
        raise UploadRefused("No config came with the form: paste a config.json or choose its file first.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UploadRefused("The file is not UTF-8 text: a config.json is JSON, which is.") from error
