; guess the number between 1 and 100
section .data
    lo    dd 1
    hi    dd 100
    tries dd 0
section .bss
    mid   resd 1
section .text
global _start
_start:
.search:
    mov eax, [lo]
    add eax, [hi]
    shr eax, 1                ; mid = (lo + hi) / 2
    mov [mid], eax
    push eax
    call guess
    inc dword [tries]
    test eax, eax
    jz .found
    js .too_low
    mov ebx, [mid]            ; too high: hi = mid - 1
    dec ebx
    mov [hi], ebx
    jmp .search
.too_low:
    mov ebx, [mid]
    lea ebx, [ebx + 1]        ; lo = mid + 1
    mov [lo], ebx
    jmp .search
.found:
    hlt
