# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every concern shares and nothing else owns: the error base class every expected failure derives from
(``errors``), the redaction that keeps credentials out of any text we print and the type that carries them
(``redact``), the one poll-until-deadline helper every wait uses (``poll``), the one retry loop with its backoff
(``retry``), the one concurrency limit of a fan-out and its threaded form (``fanout``), the one image-reference parser
(``images``), the one reader of version strings (``versions``), the one way a private file is written (``files``),
a path read as a path option reads it and the files a play names that are missing (``paths``), key material a
library reads by path kept in memory (``keyfiles``), the YAML loaders (``yamlload``) and the guard of every reader of
outside input: size, UTF-8, depth (``untrusted``), who runs a playbook (``who``) and which process runs it, alive or
not (``processes``), and the release set this collection is tested with, the one place a version
is written (``release``). Plain Python: no Ansible, no network."""
